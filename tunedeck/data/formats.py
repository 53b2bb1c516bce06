"""Row formats: how each source shape is recognised, checked and turned into a canonical row.

Seven source formats map onto five canonical kinds:

| source format       | recognised by                     | kind                | canonical row |
|---------------------|-----------------------------------|---------------------|---------------|
| `text`              | `text`                            | `text`              | `text` |
| `prompt_completion` | `prompt`, `completion`            | `prompt_completion` | `prompt`, `completion` |
| `alpaca`            | `instruction`, `output`           | `prompt_completion` | see `ALPACA_TEMPLATE` |
| `chat`              | `messages` (OpenAI style)         | `chat`              | `messages` |
| `sharegpt`          | `conversations` of `from`/`value` | `chat`              | `messages` |
| `classification`    | `text`, `label`                   | `classification`    | `text`, `label` (a string) |
| `extraction`        | `input`, `output` (JSON object)   | `extraction`        | `input`, `output` |

A canonical message is `{"role", "content"}` plus `tool_calls`, `name`,
`tool_call_id` and `weight` (0 or 1, assistant messages) when the source has them.
A chat row also keeps its `tools` (function definitions for the chat template) when given.

Keys a format does not know (an `id`, some metadata) are ignored and do not reach
the canonical row, so they do not change its hash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from tunedeck.core.errors import Issue

SourceFormat = Literal[
    "text", "prompt_completion", "chat", "alpaca", "sharegpt", "classification", "extraction"
]
Kind = Literal["text", "prompt_completion", "chat", "classification", "extraction"]

KIND_OF_FORMAT: Final[dict[str, str]] = {
    "text": "text",
    "prompt_completion": "prompt_completion",
    "alpaca": "prompt_completion",
    "chat": "chat",
    "sharegpt": "chat",
    "classification": "classification",
    "extraction": "extraction",
}

# Fields whose presence identifies a format, most specific first: a row with
# `text` and `label` is classification, not text with an extra key.
SIGNATURES: Final[tuple[tuple[str, frozenset[str]], ...]] = (
    ("chat", frozenset({"messages"})),
    ("sharegpt", frozenset({"conversations"})),
    ("alpaca", frozenset({"instruction", "output"})),
    ("prompt_completion", frozenset({"prompt", "completion"})),
    ("classification", frozenset({"text", "label"})),
    ("extraction", frozenset({"input", "output"})),
    ("text", frozenset({"text"})),
)
SIGNATURE_OF: Final[dict[str, frozenset[str]]] = dict(SIGNATURES)

ALPACA_PREAMBLE: Final[str] = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request."
)
ALPACA_PREAMBLE_WITH_INPUT: Final[str] = (
    "Below is an instruction that describes a task, paired with an input that provides further "
    "context. Write a response that appropriately completes the request."
)
ALPACA_TEMPLATE: Final[str] = "{system}\n\n### Instruction:\n{instruction}\n\n### Response:\n"
"""Prompt built from an Alpaca row without `input` (or with an empty one).

`{system}` is the row's `system` when given, else `ALPACA_PREAMBLE`. The
completion is the row's `output`, unchanged; the loss is computed on it only.
"""
ALPACA_TEMPLATE_WITH_INPUT: Final[str] = (
    "{system}\n\n### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
)
"""Prompt built from an Alpaca row with a non-empty `input`.

`{system}` is the row's `system` when given, else `ALPACA_PREAMBLE_WITH_INPUT`.
"""

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

Row = dict[str, Any]
Normaliser = Callable[[Mapping[str, Any], bool], tuple[Row | None, list[Issue]]]


def detect_format(record: Mapping[str, Any]) -> str | None:
    """The source format whose identifying fields `record` has, or None."""
    keys = record.keys()
    for name, signature in SIGNATURES:
        if signature <= keys:
            return name
    return None


def describe(value: object) -> str:
    """A short description of a found value for error messages: its type, and a preview."""
    if value is None:
        return "null"
    if isinstance(value, str):
        preview = value if len(value) <= 40 else value[:37] + "..."
        return f"string {json.dumps(preview, ensure_ascii=False)}" if value.strip() else "an empty string"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)[:8]}"
    return type(value).__name__


def _text(
    record: Mapping[str, Any],
    key: str,
    issues: list[Issue],
    *,
    field: str | None = None,
    required: bool = True,
) -> str | None:
    """The non-empty string at `key`, or None after appending the matching issue."""
    name = field or key
    if key not in record:
        if required:
            issues.append(Issue("missing field", field=name, expected="a non-empty string", found="nothing"))
        return None
    value = record[key]
    if not isinstance(value, str):
        issues.append(Issue("wrong type", field=name, expected="a string", found=describe(value)))
        return None
    if required and not value.strip():
        issues.append(Issue("empty text", field=name, expected="a non-empty string", found=describe(value)))
        return None
    return value


def _normalise_text(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    text = _text(record, "text", issues)
    return ({"text": text} if not issues else None), issues


def _normalise_prompt_completion(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    prompt = _text(record, "prompt", issues)
    completion = _text(record, "completion", issues)
    return ({"prompt": prompt, "completion": completion} if not issues else None), issues


def _normalise_alpaca(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    instruction = _text(record, "instruction", issues)
    output = _text(record, "output", issues)
    extra = _text(record, "input", issues, required=False) or ""
    system = _text(record, "system", issues, required=False)
    if issues or instruction is None or output is None:
        return None, issues
    if extra.strip():
        prompt = ALPACA_TEMPLATE_WITH_INPUT.format(
            system=system if system else ALPACA_PREAMBLE_WITH_INPUT, instruction=instruction, input=extra
        )
    else:
        prompt = ALPACA_TEMPLATE.format(system=system if system else ALPACA_PREAMBLE, instruction=instruction)
    return {"prompt": prompt, "completion": output}, issues


def _decode_cell(value: Any, tabular: bool) -> Any:
    """CSV cells are strings: a structured field there holds JSON text, decoded here."""
    if tabular and isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _tools(record: Mapping[str, Any], issues: list[Issue], *, json_text: bool) -> list[Any] | None:
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
        return _text(message, key, issues, field=field)
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
    return _text({key: "".join(texts)}, key, issues, field=field)


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


def _chat_message(message: object, where: str, issues: list[Issue]) -> Row | None:
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
        _text(message, "name", issues, field=f"{where}.name")
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


def _normalise_chat(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    messages = _decode_cell(record.get("messages"), tabular)
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
    tools = _tools(record, issues, json_text=tabular)
    out: list[Row] = []
    for index, message in enumerate(messages):
        item = _chat_message(message, f"messages[{index}]", issues)
        if item is not None:
            out.append(item)
    _check_answers(out, issues, "messages", "at least one assistant message")
    if issues:
        return None, issues
    return ({"messages": out, "tools": tools} if tools else {"messages": out}), issues


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


def _sharegpt_turn(turn: object, where: str, issues: list[Issue]) -> Row | None:
    """One ShareGPT turn ({from, value}, or OpenAI-style {role, content}) as a canonical message."""
    if not isinstance(turn, dict):
        issues.append(Issue("wrong type", field=where, expected="an object with from and value", found=describe(turn)))
        return None
    if "from" not in turn and "role" in turn:
        return _chat_message(turn, where, issues)
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


def _normalise_sharegpt(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    turns = _decode_cell(record.get("conversations"), tabular)
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
    tools = _tools(record, issues, json_text=True)
    # A row-level `system` is the conversation's system prompt, as LLaMA-Factory reads it; an
    # empty one (a blank CSV cell) says nothing.
    system = _text(record, "system", issues, required=False)
    out: list[Row] = []
    for index, turn in enumerate(turns):
        item = _sharegpt_turn(turn, f"conversations[{index}]", issues)
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


def _normalise_classification(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    text = _text(record, "text", issues)
    label = record.get("label")
    # Labels are class names: 1 in JSONL and "1" in CSV are the same class, so store strings.
    if isinstance(label, int) and not isinstance(label, bool):
        label = str(label)
    if not isinstance(label, str) or not label.strip():
        issues.append(
            Issue(
                "missing field" if "label" not in record else "wrong type",
                field="label",
                expected="a non-empty string or an integer",
                found=describe(record.get("label")),
            )
        )
    return ({"text": text, "label": label.strip()} if not issues and isinstance(label, str) else None), issues


def _normalise_extraction(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    text = _text(record, "input", issues)
    output = _decode_cell(record.get("output"), tabular)
    if not isinstance(output, dict):
        issues.append(
            Issue(
                "missing field" if "output" not in record else "wrong type",
                field="output",
                expected="a JSON object",
                found=describe(output),
            )
        )
    return ({"input": text, "output": output} if not issues else None), issues


NORMALISERS: Final[dict[str, Normaliser]] = {
    "text": _normalise_text,
    "prompt_completion": _normalise_prompt_completion,
    "alpaca": _normalise_alpaca,
    "chat": _normalise_chat,
    "sharegpt": _normalise_sharegpt,
    "classification": _normalise_classification,
    "extraction": _normalise_extraction,
}


def normalise(
    record: Mapping[str, Any], source_format: str, *, tabular: bool = False
) -> tuple[Row | None, list[Issue]]:
    """Check `record` as `source_format` and return its canonical row, or None and every issue found.

    `tabular` says the record came from a CSV file, where structured fields
    (messages, conversations, extraction output) are stored as JSON text.
    Issues carry the field and expectation; the caller adds file and line.
    """
    return NORMALISERS[source_format](record, tabular)


def searchable_text(row: Mapping[str, Any]) -> str:
    """All the text of a canonical row joined by newlines: what dedup and scanning look at."""
    if "messages" in row:
        return "\n".join(str(message.get("content") or "") for message in row["messages"])
    if "prompt" in row:
        return f"{row['prompt']}\n{row['completion']}"
    if "input" in row:
        return f"{row['input']}\n{json.dumps(row['output'], sort_keys=True, ensure_ascii=False)}"
    return str(row.get("text", ""))
