"""Row formats: how each source shape is recognised, checked and turned into a canonical row.

Fourteen source formats map onto seven canonical kinds (the seven preference formats and their
`preference` and `unpaired_preference` rows are described in `preference_formats`):

| source format       | recognised by                     | kind                | canonical row |
|---------------------|-----------------------------------|---------------------|---------------|
| `text`              | `text`                            | `text`              | `text` |
| `prompt_completion` | `prompt`, `completion`            | `prompt_completion` | `prompt`, `completion` (or chat) |
| `alpaca`            | `instruction`, `output`           | `chat`              | `messages`, `plain_prompt` (below) |
| `chat`              | `messages` (OpenAI style)         | `chat`              | `messages` |
| `sharegpt`          | `conversations` of `from`/`value` | `chat`              | `messages` |
| `classification`    | `text`, `label` (or a named field)| `classification`    | `text`, `label` (a string) |
| `extraction`        | `input`, `output` (JSON object)   | `extraction`        | `input`, `output` |
| `preference` (+3)   | `chosen`, `rejected` (+ OpenAI's) | `preference`        | `prompt`, `chosen`, `rejected` |
| `unpaired_preference`(+2)| `prompt`, `completion`, `label` | `unpaired_preference` | `prompt`, `completion`, `label`|

A canonical message is `{"role", "content"}` plus `tool_calls`, `name`,
`tool_call_id` and `weight` (0 or 1, assistant messages) when the source has them
(weight 0 also marks an assistant message inside a conversational prompt: context only).
A chat row also keeps its `tools` (function definitions for the chat template) when given.

`prompt_completion` rows whose `prompt` and `completion` are lists of messages (the
conversational form TRL accepts) also make chat rows. A file's kind is set by its first
valid row (see `RowChecker`).

Alpaca rows are chat rows, so a model is trained through its own chat template, the same
one `generate`, the playground and evaluation prompt it with. As LLaMA-Factory reads them:
the `system` message when given, one user turn of `instruction` and `input` joined by a
newline (the input only when non-empty), then the `output` as the trained assistant turn;
a row's `history` pairs come first as earlier user/assistant turns. A row without history
also keeps `plain_prompt`, the fixed Stanford prompt (`ALPACA_TEMPLATE`), which the
tokenization uses instead for a tokenizer without a chat template. The tokenizer is not
known here, so the canonical row carries both forms: its hash depends on the row only.

Keys a format does not know (an `id`, some metadata) do not reach the canonical
row, so they do not change its hash; validation counts and lists them by name
so none is dropped unnoticed (see `KNOWN_FIELDS`).

Multimodal rows are recognised only to be refused with their reason (see `refusal`):
training here is text-only, so their media would be lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final, Literal

# The fields each format is recognised by and reads live with the upload form's vocabulary, so the
# dashboard can offer them for a column mapping without loading this module; named here too.
from tunedeck.core.dataset_vocabulary import KNOWN_FIELDS as KNOWN_FIELDS
from tunedeck.core.dataset_vocabulary import PLAIN_PROMPT_FIELD as PLAIN_PROMPT_FIELD
from tunedeck.core.dataset_vocabulary import SIGNATURE_OF as SIGNATURE_OF
from tunedeck.core.dataset_vocabulary import SIGNATURES as SIGNATURES
from tunedeck.core.errors import Issue

SourceFormat = Literal[
    "text", "prompt_completion", "chat", "alpaca", "sharegpt", "classification", "extraction",
    "preference", "openai_preference", "sharegpt_preference", "alpaca_preference",
    "unpaired_preference", "sharegpt_kto", "alpaca_kto", "chat_kto",
]
Kind = Literal[
    "text", "prompt_completion", "chat", "classification", "extraction", "preference", "unpaired_preference"
]

KIND_OF_FORMAT: Final[dict[str, str]] = {
    "text": "text",
    "prompt_completion": "prompt_completion",
    "alpaca": "chat",
    "chat": "chat",
    "sharegpt": "chat",
    "classification": "classification",
    "extraction": "extraction",
    "preference": "preference",
    "openai_preference": "preference",
    "sharegpt_preference": "preference",
    "alpaca_preference": "preference",
    "unpaired_preference": "unpaired_preference",
    "sharegpt_kto": "unpaired_preference",
    "alpaca_kto": "unpaired_preference",
    "chat_kto": "unpaired_preference",
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
"""The `plain_prompt` of an Alpaca row without `input` (or with an empty one).

`{system}` is the row's `system` when given, else `ALPACA_PREAMBLE`. For a tokenizer
without a chat template the row trains as this prompt then the row's `output`, unchanged;
the loss is computed on the output only.
"""
ALPACA_TEMPLATE_WITH_INPUT: Final[str] = (
    "{system}\n\n### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n"
)
"""The `plain_prompt` of an Alpaca row with a non-empty `input`.

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


def detect_format(record: Mapping[str, Any], label_column: str = DEFAULT_LABEL_COLUMN) -> str | None:
    """The source format whose identifying fields `record` has, or None.

    `label_column` is the field holding a classification label when it is not `label`.
    """
    keys = record.keys()
    if label_column != DEFAULT_LABEL_COLUMN and {"text", label_column} <= keys:
        return "classification"
    for name, signature in SIGNATURES:
        if name in ("unpaired_preference", "chat_kto") and signature <= keys and not _is_flag(record["label"]):
            continue  # a class name or score beside a prompt/completion pair or a chat: not a desirability mark
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
    """The shape name and the reason when `record` is a kind of data training here must refuse.

    Checked before `detect_format`: a multimodal row also has `messages` or
    `conversations`, so without this it would pass as a text row missing its media.
    """
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
    # Read as LLaMA-Factory does: the system prompt, the earlier pairs as user/assistant turns,
    # then instruction and input joined by a newline. Every assistant turn is trained, history
    # answers included, as LLaMA-Factory does by default (its `mask_history` is off).
    messages: list[Row] = [{"role": "system", "content": system}] if system.strip() else []
    for query, answer in history:
        messages += [{"role": "user", "content": query}, {"role": "assistant", "content": answer}]
    query = "\n".join(part for part in (instruction, extra) if part.strip())
    messages += [{"role": "user", "content": query}, {"role": "assistant", "content": output}]
    if history:
        # The Stanford template has no earlier turns: such a row needs the model's chat template.
        return {"messages": messages}, issues
    return {"messages": messages, PLAIN_PROMPT_FIELD: alpaca_prompt(instruction, extra, system)}, issues


def alpaca_prompt(instruction: str, extra: str = "", system: str = "") -> str:
    """The fixed Stanford Alpaca prompt (`ALPACA_TEMPLATE`): what a model without a chat template is trained on.

    `extra` is the row's `input` (shown only when non-blank); an empty `system` takes the
    Stanford preamble.
    """
    if extra.strip():
        return ALPACA_TEMPLATE_WITH_INPUT.format(
            system=system if system else ALPACA_PREAMBLE_WITH_INPUT, instruction=instruction, input=extra
        )
    return ALPACA_TEMPLATE.format(system=system if system else ALPACA_PREAMBLE, instruction=instruction)


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
    if source_format in NORMALISERS:
        return NORMALISERS[source_format](record, tabular)
    # The preference formats build on this module's readers of messages, ShareGPT and Alpaca rows,
    # so they live in their own module, which imports this one.
    from tunedeck.data.preference_formats import PREFERENCE_NORMALISERS

    normaliser: Normaliser = PREFERENCE_NORMALISERS[source_format]
    return normaliser(record, tabular)


PREFERENCE_FIELDS: Final[tuple[str, ...]] = ("prompt", "chosen", "rejected", "completion")
"""The fields of canonical preference and unpaired preference rows that hold text, in reading order."""


def is_preference_row(row: Mapping[str, Any]) -> bool:
    """Whether a canonical row is a preference or an unpaired preference (KTO) row."""
    return "chosen" in row or ("completion" in row and "label" in row)


def _joined(value: Any, system: bool) -> str:
    """A text, or the contents of a list of messages joined by newlines (system ones only if `system`)."""
    if isinstance(value, list):
        return "\n".join(str(m.get("content") or "") for m in value if system or m.get("role") != "system")
    return str(value)


def searchable_text(row: Mapping[str, Any], *, system: bool = True) -> str:
    """All the text of a canonical row joined by newlines: what dedup and scanning look at.

    `system` False leaves out the system messages of preference rows (dedup compares content).
    A preference row reads prompt then answers; an unpaired one ends with its label, so the same
    completion marked both ways is not one row twice.
    """
    if is_preference_row(row):
        parts = [_joined(row[name], system) for name in PREFERENCE_FIELDS if name in row]
        if "label" in row:
            parts.append(f"label: {str(row['label']).lower()}")
        return "\n".join(parts)
    if "messages" in row:
        return "\n".join(str(message.get("content") or "") for message in row["messages"])
    if "prompt" in row:
        return f"{row['prompt']}\n{row['completion']}"
    if "input" in row:
        return f"{row['input']}\n{json.dumps(row['output'], sort_keys=True, ensure_ascii=False)}"
    return str(row.get("text", ""))
