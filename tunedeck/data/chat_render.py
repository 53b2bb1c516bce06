"""Chat rows → token ids and an assistant mask, with the tokenizer's own chat template.

Two ways to find the assistant tokens, because templates differ:

* The template wraps assistant turns in `{% generation %}` … `{% endgeneration %}`: the
  template author marked exactly what the model must learn, so those spans are used.
* Otherwise, incremental rendering: for each assistant turn i, render the conversation up
  to turn i with the generation prompt (what the model sees at inference) and the
  conversation through turn i. The characters between the two are the assistant's answer
  (its content and end-of-turn marker; whitespace the template adds after the marker is
  not trained). This only holds when each shorter rendering is a prefix of the longer
  one; a template that rewrites earlier turns (as those that drop the reasoning of earlier
  answers do) is refused rather than masked wrongly, naming the turn and the fix: train
  only the last answer (`weight: 0` on earlier assistant turns, which are then not located)
  or use a template with markers.

A template that refuses system messages (it raises, as Gemma's does) gets the system text
at the start of the first user message, then a blank line, then the user's text: what such
models are documented to expect. `RenderedChats.system_merged` counts those conversations.

Tokens are mapped to character spans with the fast tokenizer's offsets: a token is an
answer token when it overlaps an answer span.

A conversation's `tools` are passed to the template (`apply_chat_template(..., tools=...)`),
so each conversation renders with its own tool definitions. An assistant message with
`weight: 0` is shown to the model but not trained: its span is left out of the mask. With
markers, the marked runs of tokens are the assistant turns in order; a template whose runs
do not match the turns one to one cannot take weights and is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from tunedeck.core.errors import DataError, Issue

_GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")


@dataclass(frozen=True)
class RenderedChats:
    """Token ids of each conversation and, per token, whether it belongs to an assistant answer."""

    input_ids: list[list[int]]
    assistant_masks: list[list[bool]]
    method: str  # "generation_markers" or "incremental_rendering"
    system_merged: int = 0  # conversations whose system text went into the first user message


def chat_template_of(tokenizer: Any) -> str | None:
    """The tokenizer's default chat template, or None when it has none."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the default one renders training rows
        template = template.get("default")
    return template if isinstance(template, str) and template.strip() else None


def chat_template_sha256(tokenizer: Any) -> str | None:
    """sha256 (hex) of the tokenizer's default chat template, None when it has none: what a run records to
    tell whether two runs rendered their rows alike."""
    template = chat_template_of(tokenizer)
    return None if template is None else hashlib.sha256(template.encode("utf-8")).hexdigest()


def has_generation_markers(template: str) -> bool:
    """Whether the template marks assistant spans with `{% generation %}`."""
    return bool(_GENERATION_TAG.search(template))


def require_chat_template(tokenizer: Any) -> str:
    """The chat template, or a DataError saying chat rows cannot be rendered without one."""
    template = chat_template_of(tokenizer)
    if template is None:
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise DataError(
            [
                Issue(
                    "chat rows need a tokenizer with a chat template, and this one has none",
                    field="messages",
                    expected="a tokenizer whose chat_template is set (an instruct/chat model)",
                    found=f"tokenizer {name!s} without chat_template",
                )
            ],
            title="cannot render chat rows",
        )
    return template


def render_chats(
    conversations: Sequence[Sequence[dict[str, Any]]],
    tokenizer: Any,
    *,
    row_labels: Sequence[str],
    tools: Sequence[list[dict[str, Any]] | None] | None = None,
    force_incremental: bool = False,
) -> RenderedChats:
    """Render and tokenize every conversation; mark the tokens of assistant answers.

    `row_labels` names each conversation in errors ("row 3", "data.jsonl:7").
    `tools` gives each conversation's tool definitions (None: no tools), passed to the template.
    Assistant messages with `weight` 0 are rendered but not marked.
    `force_incremental` uses incremental rendering even when markers exist (tests compare both).
    """
    template = require_chat_template(tokenizer)
    if not getattr(tokenizer, "is_fast", False):
        raise DataError(
            [
                Issue(
                    "chat loss masks need a fast tokenizer (token offsets)",
                    expected="a fast tokenizer",
                    found=type(tokenizer).__name__,
                )
            ]
        )
    all_tools: list[list[dict[str, Any]] | None] = list(tools) if tools is not None else [None] * len(conversations)
    messages, merged = template_conversations(conversations, tokenizer)
    trained = [[m.get("weight") != 0 for m in conv if m.get("role") == "assistant"] for conv in conversations]
    if has_generation_markers(template) and not force_incremental:
        rendered = _render_with_markers(messages, all_tools, trained, tokenizer, row_labels)
    else:
        rendered = _render_incrementally(messages, all_tools, trained, tokenizer, row_labels)
    return RenderedChats(rendered.input_ids, rendered.assistant_masks, rendered.method, merged)


def template_conversations(
    conversations: Sequence[Sequence[dict[str, Any]]], tokenizer: Any
) -> tuple[list[list[dict[str, Any]]], int]:
    """The conversations as the chat template is given them, in training and in evaluation alike.

    A message's `weight` decides the loss mask only: the template never sees it. For a template
    that refuses system messages, the system text goes into the first user message. Also returns
    how many conversations were merged that way.
    """
    messages = [[{k: v for k, v in m.items() if k != "weight"} for m in conv] for conv in conversations]
    merged = 0
    if any(m.get("role") == "system" for conv in messages for m in conv) and refuses_system_role(tokenizer):
        for index, conv in enumerate(messages):
            if conv and conv[0].get("role") == "system":
                messages[index] = merge_system_into_user(conv)
                merged += 1
    return messages, merged


def refuses_system_role(tokenizer: Any) -> bool:
    """Whether the chat template raises on a system message but renders the same chat without it."""
    user = {"role": "user", "content": "hello"}
    try:
        tokenizer.apply_chat_template([{"role": "system", "content": "be concise"}, user], tokenize=False)
        return False
    except Exception:  # a template raises on purpose (e.g. "System role not supported")
        pass
    try:
        tokenizer.apply_chat_template([user], tokenize=False)
    except Exception:  # refuses more than the system role: let the row errors say what
        return False
    return True


def merge_system_into_user(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with its leading system message(s) put at the start of the first user message.

    System text, a blank line, then the user text. Without a user message next, the system
    text becomes a user message of its own. Non-text content is left as it is (the template's
    own error then names the row).
    """
    count = 0
    while count < len(conversation) and conversation[count].get("role") == "system":
        count += 1
    system_texts = [m.get("content") for m in conversation[:count]]
    if not all(isinstance(text, str) for text in system_texts):
        return conversation
    system_text = "\n\n".join(str(text) for text in system_texts)
    rest = conversation[count:]
    if rest and rest[0].get("role") == "user" and isinstance(rest[0].get("content"), str):
        first = {**rest[0], "content": f"{system_text}\n\n{rest[0]['content']}"}
        return [first, *rest[1:]]
    return [{"role": "user", "content": system_text}, *rest]


def _tools_key(tools: list[dict[str, Any]] | None) -> str:
    return json.dumps(tools, sort_keys=True, ensure_ascii=False)


def _render_with_markers(
    messages: list[list[dict[str, Any]]],
    tools: list[list[dict[str, Any]] | None],
    trained: list[list[bool]],
    tokenizer: Any,
    row_labels: Sequence[str],
) -> RenderedChats:
    if not messages:
        return RenderedChats([], [], "generation_markers")
    # One batched call per distinct tool list: the template takes one `tools` for a whole batch.
    groups: dict[str, list[int]] = {}
    for index, conv_tools in enumerate(tools):
        groups.setdefault(_tools_key(conv_tools), []).append(index)
    input_ids: list[list[int]] = [[] for _ in messages]
    masks: list[list[bool]] = [[] for _ in messages]
    for indices in groups.values():
        group = [messages[i] for i in indices]
        try:
            out = tokenizer.apply_chat_template(
                group, tools=tools[indices[0]], tokenize=True, return_dict=True, return_assistant_tokens_mask=True
            )
        except Exception as error:  # a template may raise on purpose (e.g. roles must alternate)
            _raise_per_row(group, [tools[i] for i in indices], tokenizer, [row_labels[i] for i in indices], error)
        for position, index in enumerate(indices):
            input_ids[index] = list(out["input_ids"][position])
            mask = [bool(flag) for flag in out["assistant_masks"][position]]
            masks[index] = _apply_weights(mask, trained[index], row_labels[index])
    return RenderedChats(input_ids, masks, "generation_markers")


def _apply_weights(mask: list[bool], trained: list[bool], label: str) -> list[bool]:
    """Unmark the runs of marked tokens that belong to assistant turns with weight 0."""
    if all(trained):
        return mask
    runs: list[tuple[int, int]] = []
    for index, flag in enumerate(mask):
        if flag and (index == 0 or not mask[index - 1]):
            runs.append((index, index + 1))
        elif flag:
            runs[-1] = (runs[-1][0], index + 1)
    if len(runs) != len(trained):
        raise DataError(
            [
                Issue(
                    f"{label}: the chat template marks {len(runs)} answer spans for {len(trained)} "
                    "assistant turns, so weight 0 cannot be applied to a single turn",
                    field="messages",
                    expected="a template whose {% generation %} spans are the assistant turns, one each",
                )
            ],
            title="cannot build loss masks for chat rows",
        )
    out = list(mask)
    for (start, end), keep in zip(runs, trained, strict=True):
        if not keep:
            out[start:end] = [False] * (end - start)
    return out


def _raise_per_row(
    messages: list[list[dict[str, Any]]],
    tools: list[list[dict[str, Any]] | None],
    tokenizer: Any,
    row_labels: Sequence[str],
    error: Exception,
) -> NoReturn:
    """Find which conversations the template refuses, to name them; re-raise as a DataError."""
    issues = []
    for conv, conv_tools, label in zip(messages, tools, row_labels, strict=True):
        try:
            tokenizer.apply_chat_template(conv, tools=conv_tools, tokenize=False)
        except Exception as row_error:
            issues.append(
                Issue(f"{label}: the chat template refused this conversation: {row_error}", field="messages")
            )
            if len(issues) >= 20:
                break
    if not issues:
        issues.append(Issue(f"the chat template failed: {error}", field="messages"))
    raise DataError(issues, title="cannot render chat rows") from error


def _render(
    tokenizer: Any,
    conversation: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    generation_prompt: bool,
) -> str:
    text = tokenizer.apply_chat_template(
        conversation, tools=tools, tokenize=False, add_generation_prompt=generation_prompt
    )
    return str(text)


def _answer_spans(
    conversation: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    trained: list[bool],
    tokenizer: Any,
    label: str,
) -> tuple[str, list[tuple[int, int]]]:
    """The full rendering and the character spans of each trained assistant answer inside it.

    Only trained turns are located: a turn with weight 0 is just context, so a template that
    rewrites it later (dropping its reasoning, say) does not stop the last answer's training.
    """
    full = _render(tokenizer, conversation, tools, False)
    spans = []
    turn = -1
    for index, message in enumerate(conversation):
        if message.get("role") != "assistant":
            continue
        turn += 1
        if not trained[turn]:
            continue
        before = _render(tokenizer, conversation[:index], tools, True) if index else ""
        through = _render(tokenizer, conversation[: index + 1], tools, False)
        if not (through.startswith(before) and full.startswith(through)):
            _refuse_rewritten_turn(conversation, tools, tokenizer, label, index, turn, len(trained))
        end = len(through)
        while end > len(before) and through[end - 1].isspace():
            end -= 1
        spans.append((len(before), end))
    return full, spans


def _refuse_rewritten_turn(
    conversation: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    tokenizer: Any,
    label: str,
    index: int,
    turn: int,
    turns: int,
) -> NoReturn:
    """Refuse an answer that cannot be located, naming the message the template renders differently."""
    differing = index
    try:
        full = _render(tokenizer, conversation, tools, False)
        # The first message whose rendering as the last one is no longer a prefix of the whole conversation's.
        differing = next((j for j in range(len(conversation))
                          if not full.startswith(_render(tokenizer, conversation[: j + 1], tools, False))), index)
    except Exception:  # a template may refuse some prefixes (e.g. one ending on an assistant turn)
        pass
    # Only trained answers are located, so training just the last one avoids rendering the earlier ones alone.
    fix = 'train only the last answer: set "weight": 0 on the earlier assistant messages' if turn < turns - 1 else ""
    fix = (fix + ", or " if fix else "") + "use a chat template with {% generation %} markers"
    raise DataError(
        [
            Issue(
                f"{label}: the chat template renders earlier turns differently once later turns are added "
                f"(messages[{differing}] renders differently in the whole conversation than when it was "
                f"the last message), so the tokens of assistant turn {turn + 1} of {turns} "
                f"(messages[{index}]) cannot be located; fix: {fix}",
                field=f"messages[{index}]",
                expected="a template where each conversation prefix renders as a text prefix, "
                "or one with {% generation %} markers",
            )
        ],
        title="cannot build loss masks for chat rows",
    )


def _render_incrementally(
    messages: list[list[dict[str, Any]]],
    tools: list[list[dict[str, Any]] | None],
    trained: list[list[bool]],
    tokenizer: Any,
    row_labels: Sequence[str],
) -> RenderedChats:
    texts: list[str] = []
    all_spans: list[list[tuple[int, int]]] = []
    for conversation, conv_tools, conv_trained, label in zip(messages, tools, trained, row_labels, strict=True):
        try:
            text, spans = _answer_spans(conversation, conv_tools, conv_trained, tokenizer, label)
        except DataError:
            raise
        except Exception as error:  # a template may raise on purpose (e.g. roles must alternate)
            raise DataError(
                [Issue(f"{label}: the chat template refused this conversation: {error}", field="messages")],
                title="cannot render chat rows",
            ) from error
        texts.append(text)
        all_spans.append(spans)
    if not texts:
        return RenderedChats([], [], "incremental_rendering")
    encoded = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    masks = [
        _overlap_mask(offsets, spans)
        for offsets, spans in zip(encoded["offset_mapping"], all_spans, strict=True)
    ]
    return RenderedChats([list(ids) for ids in encoded["input_ids"]], masks, "incremental_rendering")


def _overlap_mask(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> list[bool]:
    """Per token, whether its character range overlaps one of the (sorted) spans."""
    mask = [False] * len(offsets)
    span_index = 0
    for token_index, (start, end) in enumerate(offsets):
        while span_index < len(spans) and start >= spans[span_index][1]:
            span_index += 1
        if span_index == len(spans):
            break
        if end > spans[span_index][0] and end > start:
            mask[token_index] = True
    return mask
