"""Prompts and deterministic batched decoding for evaluating extraction and generation.

The prompt is exactly what training conditioned the answer on:

* `chat`: the conversation minus its final assistant turn, rendered with the tokenizer's
  chat template and `add_generation_prompt=True`; the reference is that final turn. On a
  tokenizer without a chat template, Alpaca rows prompt with their `plain_prompt` as
  prompt/completion rows do (what training did, see `tokenize.plain_prompt_rows`).
* `prompt_completion` / `extraction`: the tokens `tokenize_rows` puts before the answer
  (the tokenizer's leading specials, then the prompt / input, encoded alone).

Decoding is greedy (`do_sample=False`, one beam) with left padding, so every prompt
ends at the same column and the first generated token of each row follows its own
last prompt token. Generation stops at the end-of-sequence token, at the chat
template's end-of-turn marker, or after `max_new_tokens`.

A prompt longer than `max_length` keeps its *last* `max_length` tokens (the generation
prompt sits at the end) and is flagged as truncated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.chat_render import require_chat_template, template_conversations
from tunedeck.data.tokenize import encode_texts, plain_prompt_rows, prompt_completion_texts, special_affixes

_SENTINEL = "\u2063tunedeck-answer\u2063"


@dataclass(frozen=True)
class EvalPrompt:
    """One prompt's token ids, whether it was cut to fit, and the expected answer."""

    ids: list[int]
    truncated: bool
    reference: Any


@dataclass(frozen=True)
class Generated:
    """One decoded answer: its text, how many tokens were generated, whether a stop token ended it."""

    text: str
    new_tokens: int
    stopped: bool


def build_prompts(rows: Sequence[Mapping[str, Any]], kind: str, tokenizer: Any, *, max_length: int) -> list[EvalPrompt]:
    """The evaluation prompts of chat, prompt_completion or extraction rows (module rules)."""
    plain = plain_prompt_rows(rows, tokenizer) if kind == "chat" else None
    if plain is not None:
        rows, kind = plain, "prompt_completion"
    if kind == "chat":
        ids, references = _chat_prompts(rows, tokenizer)
    elif kind in ("prompt_completion", "extraction"):
        head, _ = special_affixes(tokenizer)
        prompts, _ = prompt_completion_texts(rows, kind)
        ids = [head + body for body in encode_texts(tokenizer, prompts)]
        references = [row["output"] if kind == "extraction" else str(row["completion"]) for row in rows]
    else:
        raise ValueError(f"rows of kind {kind!r} have no answer to generate")
    return [
        EvalPrompt(row_ids[-max_length:], len(row_ids) > max_length, reference)
        for row_ids, reference in zip(ids, references, strict=True)
    ]


def _chat_prompts(rows: Sequence[Mapping[str, Any]], tokenizer: Any) -> tuple[list[list[int]], list[str]]:
    require_chat_template(tokenizer)
    texts, references, issues = [], [], []
    # As in training: the same messages (no weights, a system role the template lacks merged) and tools.
    conversations, _ = template_conversations([row["messages"] for row in rows], tokenizer)
    for index, (row, messages) in enumerate(zip(rows, conversations, strict=True)):
        if not messages or messages[-1].get("role") != "assistant":
            issues.append(
                Issue(
                    f"row {index + 1}: the conversation does not end with an assistant turn",
                    field="messages",
                    expected="a final assistant message to compare the answer with",
                )
            )
            continue
        texts.append(str(tokenizer.apply_chat_template(
            messages[:-1], tools=row.get("tools") or None, tokenize=False, add_generation_prompt=True
        )))
        references.append(str(messages[-1].get("content") or ""))
    if issues:
        raise DataError(issues[:20], title="cannot evaluate chat rows")
    # The template writes the special tokens itself, as in training.
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]], references


def end_of_turn_marker(tokenizer: Any) -> str | None:
    """The text the chat template puts after an assistant answer (e.g. `<|end|>`), if any.

    Found by rendering a one-turn conversation with a sentinel answer: whatever follows the
    sentinel, up to whitespace, closes the turn. Training teaches the model to emit it.
    """
    if getattr(tokenizer, "chat_template", None) is None:
        return None
    try:
        text = str(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": "x"}, {"role": "assistant", "content": _SENTINEL}], tokenize=False
            )
        )
    except Exception:  # a template may refuse a probe conversation; then there is no marker to stop at
        return None
    after = text.split(_SENTINEL, 1)[-1].strip() if _SENTINEL in text else ""
    marker = after.split()[0] if after else ""
    eos = getattr(tokenizer, "eos_token", None)
    return marker or (eos if isinstance(eos, str) else None)


def stop_token_ids(model: Any, tokenizer: Any, marker: str | None) -> list[int]:
    """Token ids that end an answer: every end-of-sequence id the model or tokenizer names, and the marker."""
    found: list[int] = []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (configured, getattr(tokenizer, "eos_token_id", None)):
        for token in value if isinstance(value, list) else [value]:
            if isinstance(token, int) and token not in found:
                found.append(token)
    if marker:
        marker_ids = tokenizer(marker, add_special_tokens=False)["input_ids"]
        if len(marker_ids) == 1 and marker_ids[0] not in found:
            found.append(int(marker_ids[0]))
    return found


def generate_greedy(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]],
    *,
    batch_size: int,
    max_new_tokens: int,
    stop_ids: Sequence[int],
    marker: str | None = None,
) -> list[Generated]:
    """Decode every prompt greedily in left-padded batches; outputs keep the prompts' order."""
    import torch
    from transformers import GenerationConfig

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (list(stop_ids) or [0])[0]
    settings = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        num_beams=1,
        pad_token_id=pad,
        eos_token_id=list(stop_ids) or None,
    )
    device = next(model.parameters()).device
    outputs: list[Generated] = []
    for start in range(0, len(prompts), batch_size):
        batch = [list(ids) for ids in prompts[start : start + batch_size]]
        width = max(len(ids) for ids in batch)
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in batch], device=device)
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch], device=device)
        with torch.no_grad():
            generated = model.generate(input_ids=input_ids, attention_mask=attention, generation_config=settings)
        for row in generated[:, width:].tolist():
            outputs.append(_cut(row, tokenizer, stop_ids, marker))
    return outputs


def _cut(row: list[int], tokenizer: Any, stop_ids: Sequence[int], marker: str | None) -> Generated:
    """The answer before the first stop token (or the marker text), without surrounding whitespace."""
    stops = set(stop_ids)
    end = next((index for index, token in enumerate(row) if token in stops), None)
    kept = row if end is None else row[:end]
    text = str(tokenizer.decode(kept, skip_special_tokens=True))
    stopped = end is not None
    if marker and marker in text:  # a marker spanning several tokens is found in the text instead
        text = text.split(marker, 1)[0]
        stopped = True
    return Generated(text.strip(), len(kept), stopped)
