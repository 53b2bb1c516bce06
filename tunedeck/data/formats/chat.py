"""Conversations: OpenAI-style `chat` rows, ShareGPT rows and TRL's conversational prompt/completion.

Each becomes a chat row, `{"messages"}` plus its `tools` (function definitions for the chat
template) when given. A canonical message is `{"role", "content"}` plus `tool_calls`, `name`,
`tool_call_id` and `weight` (0 or 1, assistant messages) when the source has them
(weight 0 also marks an assistant message inside a conversational prompt: context only).

`prompt_completion` rows whose `prompt` and `completion` are lists of messages (the
conversational form TRL accepts) also make chat rows (`normalise_conversational`).

The message readers here (`chat_message`, `sharegpt_turn`) are also how the preference
formats read their conversations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from tunedeck.core.dataset_vocabulary import PLAIN_PROMPT_FIELD
from tunedeck.core.errors import Issue
from tunedeck.data.formats.field_readers import Row, decode_cell, describe, read_text

CHAT_ROLES: Final[frozenset[str]] = frozenset({"system", "user", "assistant", "tool"})


# Other names sources use for the same roles: OpenAI's `developer` is its newer name for the
# system prompt, and its legacy `function` role is a tool result (it keeps its `name`).
CHAT_ROLE_ALIASES: Final[dict[str, str]] = {"developer": "system", "function": "tool"}


# ShareGPT `from` values, as LLaMA-Factory reads them: `function_call` is the assistant calling
# a tool (trained, it is the model's output) and `observation` is the tool's answer (masked).
SHAREGPT_ROLES: Final[dict[str, str]] = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "function_call": "assistant",
    "observation": "tool",
    "tool": "tool",
}


# Message keys carried into the canonical row besides role and content.
_CHAT_EXTRA_KEYS: Final[tuple[str, ...]] = ("tool_calls", "name", "tool_call_id")


def read_tools(record: Mapping[str, Any], issues: list[Issue], *, json_text: bool) -> list[Any] | None:
    """The row's `tools` (function definitions handed to the chat template), or None when absent.

    `json_text` accepts the list written as JSON text (CSV cells, LLaMA-Factory's `tools` column);
    an empty text or list means no tools.
    """
    value = record.get("tools")
    if value is None:
        return None
    if json_text and isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            issues.append(
                Issue(
                    f"tools is not valid JSON ({error.msg})",
                    field="tools",
                    expected="a list of tool definitions (objects), or its JSON text",
                    found=describe(record.get("tools")),
                )
            )
            return None
    if not isinstance(value, list) or not all(isinstance(tool, dict) for tool in value):
        issues.append(
            Issue(
                "wrong type",
                field="tools",
                expected="a list of tool definitions (objects)",
                found=describe(value),
            )
        )
        return None
    return value or None


def _content(message: Mapping[str, Any], key: str, field: str, issues: list[Issue]) -> str | None:
    """A message's text: a string, or the text parts of a list of content parts joined.

    Parts are joined with nothing between them, as OpenAI and TRL concatenate text parts.
    Non-text parts (images, audio) cannot be trained by a text-only supervised run.
    """
    content = message.get(key)
    if not isinstance(content, list):
        return read_text(message, key, issues, field=field)
    texts: list[str] = []
    for index, part in enumerate(content):
        where = f"{field}[{index}]"
        if not isinstance(part, dict):
            issues.append(Issue("wrong type", field=where, expected='a {"type": "text", "text": ...} part',
                                found=describe(part)))
            return None
        if part.get("type") != "text":
            issues.append(
                Issue(
                    "multimodal rows are not supported for supervised training",
                    field=f"{where}.type",
                    expected='"text" parts only',
                    found=describe(part.get("type")),
                )
            )
            return None
        if not isinstance(part.get("text"), str):
            issues.append(Issue("missing field" if "text" not in part else "wrong type", field=f"{where}.text",
                                expected="a string", found=describe(part.get("text"))))
            return None
        texts.append(part["text"])
    return read_text({key: "".join(texts)}, key, issues, field=field)


def _decoded_calls(calls: list[Any], field_of: Callable[[int], str], issues: list[Issue]) -> list[Any]:
    """Tool calls with `function.arguments` given as JSON text decoded to an object.

    Templates serialise the arguments themselves (`tojson`); left as text they would be
    serialised again and the model would learn an escaped string instead of the call.
    `field_of(i)` names call i's arguments in issues, as the source spells them.
    """
    out: list[Any] = []
    for index, call in enumerate(calls):
        function = call.get("function")
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(function, dict) and isinstance(arguments, str):
            where = field_of(index)
            try:
                decoded = json.loads(arguments)
            except json.JSONDecodeError as error:
                issues.append(Issue(f"tool call arguments are not valid JSON ({error.msg})", field=where,
                                    expected="a JSON object, or its JSON text", found=describe(arguments)))
                continue
            if not isinstance(decoded, dict):
                issues.append(Issue("wrong type", field=where, expected="a JSON object, or its JSON text",
                                    found=describe(decoded)))
                continue
            call = {**call, "function": {**function, "arguments": decoded}}
        out.append(call)
    return out


def _tool_calls(message: Mapping[str, Any], role: str, where: str, issues: list[Issue]) -> list[Any] | None:
    """The message's tool calls (legacy `function_call` as a one-call list), arguments decoded."""
    calls = message.get("tool_calls")
    legacy = message.get("function_call")
    field = f"{where}.tool_calls"
    if legacy is not None:
        if calls is not None:
            issues.append(Issue("both tool_calls and function_call", field=f"{where}.function_call",
                                expected="tool_calls or the legacy function_call, not both",
                                found="both"))
            return None
        if role != "assistant" or not isinstance(legacy, dict):
            issues.append(Issue("wrong type", field=f"{where}.function_call",
                                expected="an object with name and arguments, on an assistant message",
                                found=f"{describe(legacy)} on a {role} message"))
            return None
        calls = [{"type": "function", "function": legacy}]
        return _decoded_calls(calls, lambda _: f"{where}.function_call.arguments", issues)
    if calls is None:
        return None
    if not (isinstance(calls, list) and calls and all(isinstance(call, dict) for call in calls)):
        issues.append(Issue("wrong type", field=field, expected="a non-empty list of objects",
                            found=describe(calls)))
        return None
    return _decoded_calls(calls, lambda index: f"{field}[{index}].function.arguments", issues)


def _weight(message: Mapping[str, Any], role: str, where: str, issues: list[Issue]) -> int | None:
    """OpenAI's per-message `weight`: 0 leaves an assistant turn untrained, 1 trains it."""
    if "weight" not in message:
        return None
    weight = message["weight"]
    if role != "assistant":
        issues.append(Issue("weight on a message that is never trained", field=f"{where}.weight",
                            expected="weight on assistant messages only", found=f"{role} message"))
        return None
    if isinstance(weight, bool) or not isinstance(weight, int | float) or weight not in (0, 1):
        issues.append(Issue("wrong weight", field=f"{where}.weight", expected="0 or 1", found=describe(weight)))
        return None
    return int(weight)


def chat_message(message: object, where: str, issues: list[Issue]) -> Row | None:
    """One OpenAI-style message as a canonical message, or None after appending its issues."""
    if not isinstance(message, dict):
        issues.append(Issue("wrong type", field=where, expected="an object with role and content",
                            found=describe(message)))
        return None
    source_role = message.get("role")
    role = CHAT_ROLE_ALIASES.get(source_role, source_role) if isinstance(source_role, str) else None
    if role is None or role not in CHAT_ROLES:
        issues.append(
            Issue(
                "unknown role",
                field=f"{where}.role",
                expected="one of " + ", ".join(sorted(CHAT_ROLES | CHAT_ROLE_ALIASES.keys())),
                found=describe(source_role),
            )
        )
        return None
    before = len(issues)
    if source_role == "function":  # a legacy function result is only meaningful with its function's name
        read_text(message, "name", issues, field=f"{where}.name")
    tool_calls = _tool_calls(message, role, where, issues)
    content: str | None
    # An assistant turn that only calls a tool has no text (null content), as in the OpenAI format.
    # (Judged on the source, so a call with broken arguments is reported once, not also as missing text.)
    calls_given = message.get("tool_calls") is not None or message.get("function_call") is not None
    if calls_given and role == "assistant" and message.get("content") in (None, "", []):
        content = ""
    else:
        content = _content(message, "content", f"{where}.content", issues)
    weight = _weight(message, role, where, issues)
    if len(issues) > before or content is None:
        return None
    item: Row = {"role": role, "content": content}
    for key in _CHAT_EXTRA_KEYS:
        if message.get(key) is not None:
            item[key] = message[key]
    if tool_calls:
        item["tool_calls"] = tool_calls
    if weight is not None:
        item["weight"] = weight
    return item


def _check_answers(out: list[Row], issues: list[Issue], field: str, expected: str) -> None:
    """A conversation must train something: at least one assistant turn not weighted 0."""
    if issues:
        return
    answers = [m for m in out if m["role"] == "assistant"]
    if not answers:
        issues.append(Issue("no assistant turn", field=field, expected=expected,
                            found="roles " + ", ".join(m["role"] for m in out)))
    elif all(m.get("weight") == 0 for m in answers):
        issues.append(Issue("no trained assistant turn", field=field,
                            expected="at least one assistant message without weight 0",
                            found="weight 0 on every assistant message"))


def normalise_chat(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """An OpenAI-style `messages` row as a chat row, with its `tools` and `plain_prompt` when given."""
    issues: list[Issue] = []
    messages = decode_cell(record.get("messages"), tabular)
    if not isinstance(messages, list) or not messages:
        issues.append(
            Issue(
                "wrong type" if messages else "no messages",
                field="messages",
                expected="a non-empty list of messages",
                found=describe(messages),
            )
        )
        return None, issues
    tools = read_tools(record, issues, json_text=tabular)
    out: list[Row] = []
    for index, message in enumerate(messages):
        item = chat_message(message, f"messages[{index}]", issues)
        if item is not None:
            out.append(item)
    _check_answers(out, issues, "messages", "at least one assistant message")
    plain = _plain_prompt(record, out, tools, issues)
    if issues:
        return None, issues
    row: Row = {"messages": out}
    if tools:
        row["tools"] = tools
    if plain is not None:
        row[PLAIN_PROMPT_FIELD] = plain
    return row, issues


def _plain_prompt(record: Mapping[str, Any], messages: list[Row], tools: list[Any] | None,
                  issues: list[Issue]) -> str | None:
    """A chat row's `plain_prompt` (canonical Alpaca rows carry one), checked; None when absent.

    It stands for everything before the answer, so it only fits a single exchange: an optional
    system message, one user message, one plain assistant answer (no tools, trained).
    """
    value = record.get(PLAIN_PROMPT_FIELD)
    if value is None or value == "":  # an empty CSV cell is no plain prompt
        return None
    roles = [m["role"] for m in messages]
    single = roles in (["user", "assistant"], ["system", "user", "assistant"])
    last = messages[-1] if messages else {}
    if not isinstance(value, str) or not value.strip():
        issues.append(Issue("wrong type", field=PLAIN_PROMPT_FIELD, expected="a non-empty string",
                            found=describe(value)))
    elif not single or tools or last.get("tool_calls") or last.get("weight") == 0:
        issues.append(Issue(f"{PLAIN_PROMPT_FIELD} needs a single exchange", field=PLAIN_PROMPT_FIELD,
                            expected="messages of an optional system, one user and one trained assistant "
                            "turn, without tools", found=" → ".join(roles)))
    else:
        return value
    return None


def _sharegpt_call(value: object, where: str, issues: list[Issue]) -> list[Any] | None:
    """A `function_call` turn's value (JSON of {name, arguments}, or a list of them) as tool calls.

    Read as LLaMA-Factory does: the value is JSON text of one call or of a list of calls.
    """
    try:
        calls = json.loads(value) if isinstance(value, str) else None
    except json.JSONDecodeError:
        calls = None
    if isinstance(calls, dict):
        calls = [calls]
    if not (isinstance(calls, list) and calls and all(
            isinstance(call, dict) and isinstance(call.get("name"), str) and "arguments" in call
            for call in calls)):
        issues.append(Issue("function call is not valid", field=f"{where}.value",
                            expected='JSON text of {"name": ..., "arguments": {...}} or a list of them',
                            found=describe(value)))
        return None
    wrapped = [{"type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
               for call in calls]
    return _decoded_calls(wrapped, lambda _: f"{where}.value", issues)


def sharegpt_turn(turn: object, where: str, issues: list[Issue]) -> Row | None:
    """One ShareGPT turn ({from, value}, or OpenAI-style {role, content}) as a canonical message."""
    if not isinstance(turn, dict):
        issues.append(Issue("wrong type", field=where, expected="an object with from and value", found=describe(turn)))
        return None
    if "from" not in turn and "role" in turn:
        return chat_message(turn, where, issues)
    source = turn.get("from")
    role = SHAREGPT_ROLES.get(source) if isinstance(source, str) else None
    if role is None:
        issues.append(
            Issue(
                "unknown role",
                field=f"{where}.from",
                expected="one of " + ", ".join(sorted(SHAREGPT_ROLES)),
                found=describe(source),
            )
        )
        return None
    if source == "function_call":
        calls = _sharegpt_call(turn.get("value"), where, issues)
        return {"role": role, "content": "", "tool_calls": calls} if calls is not None else None
    value = _content(turn, "value", f"{where}.value", issues)
    return {"role": role, "content": value} if value is not None else None


def normalise_sharegpt(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """A ShareGPT `conversations` row as a chat row; a row-level `system` becomes the first message."""
    issues: list[Issue] = []
    turns = decode_cell(record.get("conversations"), tabular)
    if not isinstance(turns, list) or not turns:
        issues.append(
            Issue(
                "wrong type" if turns else "no turns",
                field="conversations",
                expected="a non-empty list of {from, value} turns",
                found=describe(turns),
            )
        )
        return None, issues
    tools = read_tools(record, issues, json_text=True)
    # A row-level `system` is the conversation's system prompt, as LLaMA-Factory reads it; an
    # empty one (a blank CSV cell) says nothing.
    system = read_text(record, "system", issues, required=False)
    out: list[Row] = []
    for index, turn in enumerate(turns):
        item = sharegpt_turn(turn, f"conversations[{index}]", issues)
        if item is not None:
            out.append(item)
    if system and system.strip():
        first = turns[0]
        if isinstance(first, dict) and (first.get("from") or first.get("role")) in ("system", "developer"):
            issues.append(Issue("two system prompts", field="system",
                                expected="a system prompt in the system column or as the first turn, not both",
                                found="both"))
        else:
            out.insert(0, {"role": "system", "content": system})
    _check_answers(out, issues, "conversations", "at least one gpt turn")
    if issues:
        return None, issues
    return ({"messages": out, "tools": tools} if tools else {"messages": out}), issues


_MESSAGE_FIELD = re.compile(r"^messages\[(\d+)\](.*)$")


def normalise_conversational(prompt: Any, completion: Any, tabular: bool) -> tuple[Row | None, list[Issue]]:
    """TRL's conversational prompt/completion: both are lists of messages; the result is a chat row.

    As in TRL, only the completion is trained: its assistant messages are the
    trained turns, and an assistant message inside the prompt is context, so it
    gets `"weight": 0` (the chat mask leaves weight-0 turns out of the loss).
    """
    issues: list[Issue] = []
    for key, value in (("prompt", prompt), ("completion", completion)):
        if not isinstance(value, list) or not value:
            issues.append(
                Issue(
                    "wrong type",
                    field=key,
                    expected="a non-empty list of messages (prompt and completion both lists, or both text)",
                    found=describe(value),
                )
            )
    if issues:
        return None, issues
    if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in completion):
        roles = [str(m.get("role")) if isinstance(m, dict) else describe(m) for m in completion]
        issues.append(
            Issue(
                "no assistant turn in the completion",
                field="completion",
                expected="at least one assistant message (only the completion is trained)",
                found="roles " + ", ".join(roles),
            )
        )
        return None, issues
    row, chat_issues = normalise_chat({"messages": [*prompt, *completion]}, tabular)
    # Name the field the user wrote: prompt[i] or completion[j], not the combined messages[k].
    for issue in chat_issues:
        match = _MESSAGE_FIELD.match(issue.field or "")
        if match:
            index = int(match.group(1))
            where = f"prompt[{index}]" if index < len(prompt) else f"completion[{index - len(prompt)}]"
            issue = replace(issue, field=where + match.group(2))
        issues.append(issue)
    if row is None:
        return None, issues
    for message in row["messages"][: len(prompt)]:
        if message["role"] == "assistant":
            message["weight"] = 0
    return row, issues
