"""Chat rows → token ids and an assistant mask, with the tokenizer's own chat template.

Two ways to find the assistant tokens, because templates differ:

* The template wraps assistant turns in `{% generation %}` … `{% endgeneration %}`: the
  template author marked exactly what the model must learn, so those spans are used.
* Otherwise, incremental rendering: for each assistant turn i, render the conversation up
  to turn i with the generation prompt (what the model sees at inference) and the
  conversation through turn i. The characters between the two are the assistant's answer
  (its content and end-of-turn marker; whitespace the template adds after the marker is
  not trained). This only holds when each shorter rendering is a prefix of the longer
  one; a template that rewrites earlier turns is refused rather than masked wrongly.

Tokens are mapped to character spans with the fast tokenizer's offsets: a token is an
answer token when it overlaps an answer span.
"""

from __future__ import annotations

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


def chat_template_of(tokenizer: Any) -> str | None:
    """The tokenizer's default chat template, or None when it has none."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # several named templates: the default one renders training rows
        template = template.get("default")
    return template if isinstance(template, str) and template.strip() else None


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
    force_incremental: bool = False,
) -> RenderedChats:
    """Render and tokenize every conversation; mark the tokens of assistant answers.

    `row_labels` names each conversation in errors ("row 3", "data.jsonl:7").
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
    messages = [[dict(m) for m in conv] for conv in conversations]
    if has_generation_markers(template) and not force_incremental:
        return _render_with_markers(messages, tokenizer, row_labels)
    return _render_incrementally(messages, tokenizer, row_labels)


def _render_with_markers(
    messages: list[list[dict[str, Any]]], tokenizer: Any, row_labels: Sequence[str]
) -> RenderedChats:
    if not messages:
        return RenderedChats([], [], "generation_markers")
    try:
        out = tokenizer.apply_chat_template(
            messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
    except Exception as error:  # a template may raise on purpose (e.g. roles must alternate)
        _raise_per_row(messages, tokenizer, row_labels, error)
    masks = [[bool(flag) for flag in row] for row in out["assistant_masks"]]
    return RenderedChats([list(ids) for ids in out["input_ids"]], masks, "generation_markers")


def _raise_per_row(
    messages: list[list[dict[str, Any]]], tokenizer: Any, row_labels: Sequence[str], error: Exception
) -> NoReturn:
    """Find which conversations the template refuses, to name them; re-raise as a DataError."""
    issues = []
    for conv, label in zip(messages, row_labels, strict=True):
        try:
            tokenizer.apply_chat_template(conv, tokenize=False)
        except Exception as row_error:
            issues.append(
                Issue(f"{label}: the chat template refused this conversation: {row_error}", field="messages")
            )
            if len(issues) >= 20:
                break
    if not issues:
        issues.append(Issue(f"the chat template failed: {error}", field="messages"))
    raise DataError(issues, title="cannot render chat rows") from error


def _render(tokenizer: Any, conversation: list[dict[str, Any]], generation_prompt: bool) -> str:
    text = tokenizer.apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=generation_prompt
    )
    return str(text)


def _answer_spans(
    conversation: list[dict[str, Any]], tokenizer: Any, label: str
) -> tuple[str, list[tuple[int, int]]]:
    """The full rendering and the character spans of each assistant answer inside it."""
    full = _render(tokenizer, conversation, False)
    spans = []
    for index, message in enumerate(conversation):
        if message.get("role") != "assistant":
            continue
        before = _render(tokenizer, conversation[:index], True) if index else ""
        through = _render(tokenizer, conversation[: index + 1], False)
        if not (through.startswith(before) and full.startswith(through)):
            raise DataError(
                [
                    Issue(
                        f"{label}: the chat template renders earlier turns differently once later turns "
                        "are added, so the answer tokens cannot be located",
                        field=f"messages[{index}]",
                        expected="a template where each conversation prefix renders as a text prefix, "
                        "or one with {% generation %} markers",
                    )
                ],
                title="cannot build loss masks for chat rows",
            )
        end = len(through)
        while end > len(before) and through[end - 1].isspace():
            end -= 1
        spans.append((len(before), end))
    return full, spans


def _render_incrementally(
    messages: list[list[dict[str, Any]]], tokenizer: Any, row_labels: Sequence[str]
) -> RenderedChats:
    texts: list[str] = []
    all_spans: list[list[tuple[int, int]]] = []
    for conversation, label in zip(messages, row_labels, strict=True):
        try:
            text, spans = _answer_spans(conversation, tokenizer, label)
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
