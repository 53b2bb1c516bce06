"""Row formats: how each source shape is recognised, checked and turned into a canonical row.

Seven source formats map onto five canonical kinds:

| source format       | recognised by                     | kind                | canonical row |
|---------------------|-----------------------------------|---------------------|---------------|
| `text`              | `text`                            | `text`              | `text` |
| `prompt_completion` | `prompt`, `completion`            | `prompt_completion` | `prompt`, `completion` (or chat) |
| `alpaca`            | `instruction`, `output`           | `prompt_completion` | see `ALPACA_TEMPLATE` (or chat) |
| `chat`              | `messages` (OpenAI style)         | `chat`              | `messages` |
| `sharegpt`          | `conversations` of `from`/`value` | `chat`              | `messages` |
| `classification`    | `text`, `label` (or a named field)| `classification`    | `text`, `label` (a string) |
| `extraction`        | `input`, `output` (JSON object)   | `extraction`        | `input`, `output` |

A canonical message is `{"role", "content"}` plus `tool_calls`, `name` and
`tool_call_id` when the source has them, and `"weight": 0` on a turn that is
context only (an assistant message inside a conversational prompt).

Two source formats can also produce chat rows: `prompt_completion` whose
`prompt` and `completion` are lists of messages (the conversational form TRL
accepts), and `alpaca` rows with a `history` of earlier turns. A file's kind is
set by its first valid row (see `RowChecker`).

Keys a format does not know (an `id`, some metadata) do not reach the canonical
row, so they do not change its hash; validation counts and lists them by name
so none is dropped unnoticed (see `KNOWN_FIELDS`).

Some shapes are recognised only to be refused with their reason (see
`refusal`): preference pairs, KTO rows and multimodal rows cannot be trained
as supervised fine-tuning without losing or mis-training part of each row.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
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

# Every top-level field each format reads; any other field is reported as ignored.
# Chat and ShareGPT rows may declare their `tools`, ShareGPT rows a `system` prompt.
KNOWN_FIELDS: Final[dict[str, frozenset[str]]] = {
    "text": frozenset({"text"}),
    "prompt_completion": frozenset({"prompt", "completion"}),
    "alpaca": frozenset({"instruction", "input", "output", "system", "history"}),
    "chat": frozenset({"messages", "tools"}),
    "sharegpt": frozenset({"conversations", "tools", "system"}),
    "classification": frozenset({"text", "label"}),
    "extraction": frozenset({"input", "output"}),
}

DEFAULT_LABEL_COLUMN: Final[str] = "label"
MULTIMODAL_FIELDS: Final[tuple[str, ...]] = ("images", "videos", "audios")
"""Media fields of multimodal rows (the names LLaMA-Factory and TRL use)."""
_MEDIA_PLACEHOLDERS: Final[tuple[str, ...]] = ("<image>", "<video>", "<audio>")
_MEDIA_PART_TYPES: Final[frozenset[str]] = frozenset(
    {"image", "image_url", "input_image", "video", "audio", "input_audio"}
)
"""Content-part types of OpenAI-style messages whose content is a list of parts."""

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


def detect_format(record: Mapping[str, Any], label_column: str = DEFAULT_LABEL_COLUMN) -> str | None:
    """The source format whose identifying fields `record` has, or None.

    `label_column` is the field holding a classification label when it is not `label`.
    """
    keys = record.keys()
    if label_column != DEFAULT_LABEL_COLUMN and {"text", label_column} <= keys:
        return "classification"
    for name, signature in SIGNATURES:
        if signature <= keys:
            return name
    return None


def _is_flag(value: object) -> bool:
    """A KTO label: a boolean, or its text in a CSV cell."""
    return isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false"))


def _has_placeholder(value: object) -> bool:
    """Whether a media placeholder such as `<image>` appears anywhere in `value`'s strings."""
    if isinstance(value, str):
        return any(tag in value for tag in _MEDIA_PLACEHOLDERS)
    if isinstance(value, list):
        return any(_has_placeholder(item) for item in value)
    if isinstance(value, dict):
        return any(_has_placeholder(item) for item in value.values())
    return False


def _has_media_part(messages: object) -> bool:
    """Whether a message's content is a list of parts holding an image, audio or video part."""
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in _MEDIA_PART_TYPES for part in content
        ):
            return True
    return False


def refusal(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """The shape name and the reason when `record` is a kind of data supervised training must refuse.

    Checked before `detect_format`: a preference row also has `prompt` (or
    `messages`), a KTO row has `prompt` and `completion`, so without this they
    would pass as supervised rows and train on the wrong text.
    """
    keys = record.keys()
    if {"chosen", "rejected"} <= keys:
        return (
            "preference (chosen/rejected)",
            "this is a preference dataset (chosen/rejected): supervised fine-tuning would train on one "
            "side only; preference tuning is not available for this file here",
        )
    if {"preferred_output", "non_preferred_output"} <= keys:
        return (
            "preference (input/preferred_output/non_preferred_output)",
            "this is a preference dataset (preferred_output/non_preferred_output): supervised "
            "fine-tuning would train on one side only; preference tuning is not available for this file here",
        )
    # TRL's unpaired preference (KTO) rows: a boolean label says whether the completion is desirable.
    # LLaMA-Factory marks the same with `kto_tag`.
    if "kto_tag" in keys or ({"prompt", "completion", "label"} <= keys and _is_flag(record["label"])):
        return (
            "KTO (prompt/completion/label true or false)",
            "this is a KTO dataset (completions labelled desirable or not): a supervised run would "
            "train the undesirable completions too; KTO is not available for this file here",
        )
    media = [key for key in MULTIMODAL_FIELDS if record.get(key) not in (None, "", [], {})]
    if not media and (record.get("image") not in (None, "")) and _has_placeholder(dict(record)):
        media = ["image"]
    if not media and _has_media_part(record.get("messages")):
        media = ["messages[].content"]
    if media:
        return (
            f"multimodal ({', '.join(media)})",
            f"this is a multimodal dataset (field {media[0]}): training here is text-only, so the "
            "media would be dropped and the text would refer to content the model never sees",
        )
    return None


def ignored_fields(
    record: Mapping[str, Any], source_format: str, label_column: str = DEFAULT_LABEL_COLUMN
) -> list[str]:
    """The top-level fields of `record` that `source_format` does not read."""
    known = KNOWN_FIELDS[source_format]
    if source_format == "classification":
        known = frozenset({"text", label_column})
    return [key for key in record if key not in known]


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


def _optional_text(record: Mapping[str, Any], key: str, issues: list[Issue]) -> str:
    """The string at `key`, or "" when it is absent or null (pandas and Parquet exports write null)."""
    if record.get(key) is None:
        return ""
    return _text(record, key, issues, required=False) or ""


def _normalise_prompt_completion(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    prompt, completion = record.get("prompt"), record.get("completion")
    if tabular:
        # A CSV cell holds a message list as JSON text; only both fields decoding to lists make it one,
        # so a text prompt that merely starts with "[" stays text.
        decoded = _decode_cell(prompt, tabular), _decode_cell(completion, tabular)
        if all(isinstance(value, list) for value in decoded):
            prompt, completion = decoded
    if isinstance(prompt, list) or isinstance(completion, list):
        return _normalise_conversational(prompt, completion, tabular)
    issues: list[Issue] = []
    prompt = _text(record, "prompt", issues)
    completion = _text(record, "completion", issues)
    return ({"prompt": prompt, "completion": completion} if not issues else None), issues


_MESSAGE_FIELD = re.compile(r"^messages\[(\d+)\](.*)$")


def _normalise_conversational(prompt: Any, completion: Any, tabular: bool) -> tuple[Row | None, list[Issue]]:
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
    row, chat_issues = _normalise_chat({"messages": [*prompt, *completion]}, tabular)
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


def _alpaca_history(value: Any, issues: list[Issue]) -> list[tuple[str, str]]:
    """LLaMA-Factory's `history`: a list of `[instruction, output]` pairs of earlier turns."""
    if value is None:
        return []
    if not isinstance(value, list):
        issues.append(
            Issue("wrong type", field="history", expected="a list of [instruction, output] pairs",
                  found=describe(value))
        )  # fmt: skip
        return []
    pairs: list[tuple[str, str]] = []
    for index, pair in enumerate(value):
        if (
            not isinstance(pair, list | tuple)
            or len(pair) != 2
            or not all(isinstance(part, str) and part.strip() for part in pair)
        ):
            issues.append(
                Issue(
                    "wrong type",
                    field=f"history[{index}]",
                    expected="a pair [instruction, output] of non-empty strings",
                    found=describe(pair),
                )
            )
            continue
        pairs.append((pair[0], pair[1]))
    return pairs


def _normalise_alpaca(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    instruction = _text(record, "instruction", issues)
    output = _text(record, "output", issues)
    extra = _optional_text(record, "input", issues)
    system = _optional_text(record, "system", issues)
    with_history = "history" in record
    history = _alpaca_history(_decode_cell(record.get("history"), tabular), issues) if with_history else []
    if issues or instruction is None or output is None:
        return None, issues
    if with_history:
        # A row with `history` becomes a chat row, as LLaMA-Factory reads it: the system prompt, the
        # earlier pairs as user/assistant turns, then instruction and input joined by a newline.
        # Every assistant turn is trained, history answers included, as LLaMA-Factory does by default
        # (its `mask_history` is off).
        messages: list[Row] = [{"role": "system", "content": system}] if system.strip() else []
        for query, answer in history:
            messages += [{"role": "user", "content": query}, {"role": "assistant", "content": answer}]
        query = "\n".join(part for part in (instruction, extra) if part.strip())
        messages += [{"role": "user", "content": query}, {"role": "assistant", "content": output}]
        return {"messages": messages}, issues
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


_INTEGRAL_TEXT = re.compile(r"^[+-]?\d+\.0*$")


def class_label(value: Any, tabular: bool = False) -> tuple[str | None, str | None]:
    """A label as its class name, or None and why it cannot be one.

    Labels are class names, so one class has one spelling whatever the file
    type: 1, 1.0 and "1" are class "1"; true/false are "true"/"false". A CSV
    cell is text, so "1.0" and "True" there (pandas writes them) are read the same way.
    """
    if isinstance(value, bool):
        return str(value).lower(), None
    if isinstance(value, int):
        return str(value), None
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value)), None
        return None, "a number that is not whole: a class label is a name or a whole number, not a score"
    if isinstance(value, str) and value.strip():
        label = value.strip()
        if tabular and label.lower() in ("true", "false"):
            return label.lower(), None
        if tabular and _INTEGRAL_TEXT.match(label):
            return str(int(float(label))), None
        return label, None
    return None, None


def _normalise_classification(
    record: Mapping[str, Any], tabular: bool, label_column: str = DEFAULT_LABEL_COLUMN
) -> tuple[Row | None, list[Issue]]:
    issues: list[Issue] = []
    text = _text(record, "text", issues)
    value = record.get(label_column)
    label, why = class_label(value, tabular)
    if label is None:
        issues.append(
            Issue(
                why or ("missing field" if label_column not in record else "wrong type"),
                field=label_column,
                expected="a non-empty string, a whole number or true/false",
                found=describe(value) if label_column in record else "nothing",
            )
        )
    return ({"text": text, "label": label} if not issues else None), issues


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
    record: Mapping[str, Any],
    source_format: str,
    *,
    tabular: bool = False,
    label_column: str = DEFAULT_LABEL_COLUMN,
) -> tuple[Row | None, list[Issue]]:
    """Check `record` as `source_format` and return its canonical row, or None and every issue found.

    `tabular` says the record came from a CSV file, where structured fields
    (messages, conversations, extraction output) are stored as JSON text.
    `label_column` names the classification label's field when it is not `label`.
    Issues carry the field and expectation; the caller adds file and line.
    """
    if source_format == "classification":
        return _normalise_classification(record, tabular, label_column)
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
