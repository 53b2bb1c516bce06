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

A canonical message is `{"role", "content"}` plus `tool_calls`, `name` and
`tool_call_id` when the source has them.

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
SHAREGPT_ROLES: Final[dict[str, str]] = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
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
    out: list[Row] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            issues.append(
                Issue(
                    "wrong type",
                    field=where,
                    expected="an object with role and content",
                    found=describe(message),
                )
            )
            continue
        role = message.get("role")
        if role not in CHAT_ROLES:
            issues.append(
                Issue(
                    "unknown role",
                    field=f"{where}.role",
                    expected="one of " + ", ".join(sorted(CHAT_ROLES)),
                    found=describe(role),
                )
            )
            continue
        tool_calls = message.get("tool_calls")
        if tool_calls is not None and not (
            isinstance(tool_calls, list) and tool_calls and all(isinstance(call, dict) for call in tool_calls)
        ):
            issues.append(
                Issue(
                    "wrong type",
                    field=f"{where}.tool_calls",
                    expected="a non-empty list of objects",
                    found=describe(tool_calls),
                )
            )
            continue
        content = message.get("content")
        # An assistant turn that only calls a tool has no text (null content), as in the OpenAI format.
        if tool_calls and role == "assistant" and (content is None or content == ""):
            content = ""
        elif _text(message, "content", issues, field=f"{where}.content") is None:
            continue
        item: Row = {"role": role, "content": content}
        for key in _CHAT_EXTRA_KEYS:
            if message.get(key) is not None:
                item[key] = message[key]
        out.append(item)
    if not issues and not any(m["role"] == "assistant" for m in out):
        issues.append(
            Issue(
                "no assistant turn",
                field="messages",
                expected="at least one assistant message",
                found="roles " + ", ".join(m["role"] for m in out),
            )
        )
    return ({"messages": out} if not issues else None), issues


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
    out: list[Row] = []
    for index, turn in enumerate(turns):
        where = f"conversations[{index}]"
        if not isinstance(turn, dict):
            issues.append(
                Issue(
                    "wrong type", field=where, expected="an object with from and value", found=describe(turn)
                )
            )
            continue
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
            continue
        value = _text(turn, "value", issues, field=f"{where}.value")
        if value is not None:
            out.append({"role": role, "content": value})
    if not issues and not any(m["role"] == "assistant" for m in out):
        issues.append(
            Issue(
                "no assistant turn",
                field="conversations",
                expected="at least one gpt turn",
                found="roles " + ", ".join(m["role"] for m in out),
            )
        )
    return ({"messages": out} if not issues else None), issues


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
