"""A chat completion request as the inputs of a `generate` work item, or the issues that refuse it.

Everything the request asks that tunedeck cannot do is refused here, naming the field
(a 400 in the client's shape), so nothing is silently ignored: more than one choice, log
probabilities, frequency or presence penalties, logit biases, an answer format other
than text, a tool choice other than `auto`/`none`, content parts other than text. The
model itself (its chat template, whether it uses tools) is checked by the worker.

Decoding: `temperature` 0 is greedy; otherwise the answer is sampled (temperature 1 by
default, as the client's API), from `seed` when given so that the same request gives the
same answer, from a fresh random number otherwise.
"""

from __future__ import annotations

import secrets
from typing import Any

from tunedeck.api.openai.schemas.chat import ChatCompletionIn, ChatMessageIn
from tunedeck.api.schemas.common import SEED_MAX
from tunedeck.api.schemas.exports import DEFAULT_NEW_TOKENS, MAX_NEW_TOKENS
from tunedeck.core.errors import Issue, IssueListError

MAX_STOP_STRINGS = 4
TOOL_CHOICES = ("auto", "none")
# A message's text content parts are joined into one text, a line apart.
PART_SEPARATOR = "\n"


def generation_inputs(body: ChatCompletionIn) -> dict[str, Any]:
    """The `generate` item's inputs for `body` (without the model); IssueListError naming each refused field."""
    issues = refused_fields(body)
    messages = [_message(index, message, issues) for index, message in enumerate(body.messages)]
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if len(stop) > MAX_STOP_STRINGS or not all(stop):
        expected = f"at most {MAX_STOP_STRINGS} non-empty strings"
        issues.append(Issue("too many or empty stop strings", field="stop", expected=expected, found=str(len(stop))))
    if issues:
        raise IssueListError(issues, title="this chat completion request cannot be answered")
    temperature = 1.0 if body.temperature is None else body.temperature
    sampled = temperature > 0
    return {
        "messages": messages,
        "tools": body.tools if body.tools and body.tool_choice != "none" else None,
        "stop": stop,
        "max_new_tokens": token_limit(body),
        "do_sample": sampled,
        "temperature": temperature if sampled else 1.0,
        "top_p": 1.0 if body.top_p is None else body.top_p,
        "seed": body.seed if body.seed is not None else secrets.randbelow(SEED_MAX),
        "stream": bool(body.stream),
    }


def token_limit(body: ChatCompletionIn) -> int:
    """The most tokens to write: `max_completion_tokens`, else `max_tokens`, else the default; refused above the
    generation limit."""
    field, asked = (
        ("max_completion_tokens", body.max_completion_tokens)
        if body.max_completion_tokens is not None
        else ("max_tokens", body.max_tokens)
    )
    if asked is None:
        return DEFAULT_NEW_TOKENS
    if asked > MAX_NEW_TOKENS:
        raise IssueListError(
            [Issue("more tokens than one answer may have", field=field, expected=f"at most {MAX_NEW_TOKENS}",
                   found=str(asked))],
            title="this chat completion request cannot be answered",
        )  # fmt: skip
    return asked


def refused_fields(body: ChatCompletionIn) -> list[Issue]:
    """An issue for each field set to something tunedeck does not do (the defaults are accepted)."""
    issues = []

    def refuse(field: str, message: str, expected: str, found: Any) -> None:
        issues.append(Issue(message, field=field, expected=expected, found=str(found)))

    if body.n not in (None, 1):
        refuse("n", "only one choice is generated", "1", body.n)
    if body.logprobs:
        refuse("logprobs", "log probabilities are not returned", "false", body.logprobs)
    if body.top_logprobs not in (None, 0):
        refuse("top_logprobs", "log probabilities are not returned", "0 or no value", body.top_logprobs)
    for field in ("frequency_penalty", "presence_penalty"):
        value = getattr(body, field)
        if value not in (None, 0):
            refuse(field, "penalties are not applied", "0 or no value", value)
    if body.logit_bias:
        refuse("logit_bias", "logit biases are not applied", "no value", body.logit_bias)
    if body.response_format is not None and body.response_format.get("type") != "text":
        refuse("response_format", "only text answers are written", '{"type": "text"}', body.response_format)
    if body.tool_choice is not None and body.tool_choice not in TOOL_CHOICES:
        refuse("tool_choice", "a tool call cannot be forced", " or ".join(TOOL_CHOICES), body.tool_choice)
    if body.stream_options is not None and not body.stream:
        refuse("stream_options", "stream options need a stream", "stream: true", "stream: false")
    return issues


def _message(index: int, message: ChatMessageIn, issues: list[Issue]) -> dict[str, Any]:
    """One message as the chat template reads it; an issue appended when its content is not text."""
    # The client's newer name for the system role: a chat template knows only `system`.
    turn: dict[str, Any] = {"role": "system" if message.role == "developer" else message.role}
    turn["content"] = _text(index, message, issues)
    if message.tool_calls:
        turn["tool_calls"] = message.tool_calls
    for key in ("name", "tool_call_id"):
        if getattr(message, key) is not None:
            turn[key] = getattr(message, key)
    return turn


def _text(index: int, message: ChatMessageIn, issues: list[Issue]) -> str:
    field = f"messages[{index}].content"
    content = message.content
    if content is None:
        if message.role == "assistant" and message.tool_calls:
            return ""  # an assistant turn that only called tools
        issues.append(Issue("no content", field=field, expected="text, or a list of text parts"))
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part_index, part in enumerate(content):
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            expected = 'parts {"type": "text", "text": ...}'
            message_text = f"content part {part_index} is not text: only text is read"
            issues.append(Issue(message_text, field=field, expected=expected, found=str(part.get("type"))))
            continue
        texts.append(part["text"])
    return PART_SEPARATOR.join(texts)
