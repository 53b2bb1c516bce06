"""Preference rows: eight source shapes checked and turned into TRL's preference and unpaired rows.

| source format         | recognised by                                     | kind                  |
|-----------------------|---------------------------------------------------|-----------------------|
| `preference`          | `chosen`, `rejected` (`prompt` optional, TRL)     | `preference`          |
| `openai_preference`   | `input`, `preferred_output`, `non_preferred_output` | `preference`        |
| `sharegpt_preference` | `conversations`, `chosen`, `rejected` (LLaMA-Factory) | `preference`      |
| `alpaca_preference`   | `instruction`, `chosen`, `rejected` (LLaMA-Factory) | `preference`        |
| `unpaired_preference` | `prompt`, `completion`, `label` true/false (TRL)  | `unpaired_preference` |
| `sharegpt_kto`        | `conversations`, `kto_tag` (LLaMA-Factory)        | `unpaired_preference` |
| `alpaca_kto`          | `instruction`, `output`, `kto_tag` (LLaMA-Factory)| `unpaired_preference` |
| `chat_kto`            | `messages`, `label` true/false (LLaMA-Factory's KTO demo) | `unpaired_preference` |

A canonical `preference` row is `{"prompt", "chosen", "rejected"}` and an
`unpaired_preference` row `{"prompt", "completion", "label"}` (label true: the completion is
desirable), as TRL's trainers take them. Either every one of those fields is a string (standard
form) or every one is a list of canonical messages (conversational form): the prompt holds
every message before the answer, system message included, and each answer is one or more
assistant messages. Conversational rows keep their `tools`.

A TRL row without `prompt` (implicit prompt) has the prompt inside both answers: it is their
longest shared start, found by the rule of TRL's `extract_prompt` (`split_implicit_prompt`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tunedeck.core.errors import Issue
from tunedeck.data.formats.chat import chat_message, normalise_chat, normalise_sharegpt, read_tools, sharegpt_turn
from tunedeck.data.formats.field_readers import Normaliser, Row, decode_cell, describe, read_text
from tunedeck.data.formats.instruction import normalise_alpaca

ANSWER_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "preference": ("chosen", "rejected"),
    "unpaired_preference": ("completion",),
}
"""The answer fields of each preference kind (the prompt comes before each of them)."""


_ABSENT: Final[object] = object()
"""A field the row does not have (unlike one that holds null)."""


_CONVERSATIONAL_OR_TEXT = "all text (standard) or all lists of messages (conversational)"


def is_conversational(row: Mapping[str, Any]) -> bool:
    """Whether a canonical preference row is in the conversational form (its prompt is a list of messages)."""
    return isinstance(row.get("prompt"), list)


def _messages(value: Any, field: str, issues: list[Issue]) -> list[Row] | None:
    """A non-empty list of OpenAI-style messages as canonical messages, or None after its issues."""
    if not isinstance(value, list) or not value:
        issues.append(Issue("wrong type" if value else "no messages", field=field,
                            expected="a non-empty list of messages", found=describe(value)))
        return None
    before = len(issues)
    out = [chat_message(message, f"{field}[{index}]", issues) for index, message in enumerate(value)]
    return [m for m in out if m is not None] if len(issues) == before else None


def _check_answer(messages: list[Row], field: str, issues: list[Issue]) -> None:
    """A conversational answer is what the model says: assistant messages only."""
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            issues.append(Issue("answer is not an assistant message", field=f"{field}[{index}].role",
                                expected="assistant", found=describe(message["role"])))


def _finish(prompt: Any, answers: dict[str, Any], tools: list[Any] | None, issues: list[Issue],
            extra: Mapping[str, Any] | None = None) -> tuple[Row | None, list[Issue]]:
    """Check the canonical fields together (one form, assistant answers, two different answers); build the row."""
    if issues:
        return None, issues
    values = {"prompt": prompt, **answers}
    lists = [name for name, value in values.items() if isinstance(value, list)]
    if lists and len(lists) != len(values):
        texts = [name for name in values if name not in lists]
        issues.append(Issue("standard and conversational fields mixed in one row", field=", ".join(texts),
                            expected=f"{', '.join(values)} {_CONVERSATIONAL_OR_TEXT}",
                            found=f"lists of messages in {', '.join(lists)}, text in {', '.join(texts)}"))
        return None, issues
    if lists:
        for name, value in answers.items():
            _check_answer(value, name, issues)
    elif tools:
        issues.append(Issue("tools need conversational rows", field="tools",
                            expected="prompt and answers as lists of messages when the row declares tools",
                            found="text prompt and answers"))
    if "chosen" in answers and answers["chosen"] == answers["rejected"]:
        issues.append(_same_answers(answers["rejected"]))
    if issues:
        return None, issues
    row: Row = {**values, **(extra or {})}
    if tools:
        row["tools"] = tools
    return row, issues


def _same_answers(value: Any) -> Issue:
    return Issue("chosen and rejected are the same", field="rejected",
                 expected="an answer different from chosen (an identical pair teaches nothing)",
                 found=describe(value) if isinstance(value, str) else "the same messages as chosen")


def _side(record: Mapping[str, Any], key: str, tabular: bool, issues: list[Issue]) -> Any:
    """One TRL field: a non-empty string, or a list of messages (JSON text in a CSV cell)."""
    value = decode_cell(record.get(key), tabular)
    if isinstance(value, list):
        return _messages(value, key, issues)
    return read_text(record, key, issues)


def split_implicit_prompt(chosen: Sequence[Any], rejected: Sequence[Any]) -> tuple[int, str | None]:
    """Where the shared prompt of two whole answers ends, by TRL's `extract_prompt` rule; and why it fails.

    The prompt is the longest shared start (characters of text, messages of a conversation),
    less a space that ends it in text. Returns the prompt's length and None, or a reason: nothing
    is shared, or one is the start of the other, so that one has nothing left as an answer (TRL
    would then cut before its last item, a split that says nothing about where the answer starts).
    """
    for idx in range(min(len(chosen), len(rejected))):
        if chosen[idx] != rejected[idx]:
            if idx > 0 and chosen[idx - 1] == " ":  # the answer starts at the space, as TRL keeps it
                idx -= 1
            return idx, None if idx > 0 else "chosen and rejected share no prompt"
    return 0, "nothing is left of an answer after the shared prompt (one is the start of the other)"


def _normalise_trl(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """TRL's preference rows: prompt/chosen/rejected, or chosen/rejected with the prompt inside both."""
    issues: list[Issue] = []
    tools = read_tools(record, issues, json_text=True)
    chosen = _side(record, "chosen", tabular, issues)
    rejected = _side(record, "rejected", tabular, issues)
    if "prompt" in record:
        return _finish(_side(record, "prompt", tabular, issues), {"chosen": chosen, "rejected": rejected},
                       tools, issues)
    if issues:
        return None, issues
    if isinstance(chosen, list) != isinstance(rejected, list):
        issues.append(Issue("standard and conversational fields mixed in one row", field="chosen, rejected",
                            expected=f"chosen and rejected {_CONVERSATIONAL_OR_TEXT}",
                            found=f"chosen {describe(chosen)}, rejected {describe(rejected)}"))
        return None, issues
    if chosen == rejected:
        return None, [_same_answers(rejected)]
    end, why = split_implicit_prompt(chosen, rejected)
    if why is not None:
        issues.append(Issue(why, field="chosen, rejected",
                            expected="chosen and rejected that start with the same prompt, then differ "
                            "(or a separate prompt field)", found=describe(chosen)))
        return None, issues
    return _finish(chosen[:end], {"chosen": chosen[end:], "rejected": rejected[end:]}, tools, issues)


def _output_messages(value: Any, field: str, issues: list[Issue]) -> list[Row] | None:
    messages = _messages(value, field, issues)
    if messages is not None:
        _check_answer(messages, field, issues)
    return messages


def _normalise_openai(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """OpenAI's preference fine-tuning rows: input {messages, tools}, preferred and non-preferred output."""
    issues: list[Issue] = []
    given = decode_cell(record.get("input"), tabular)
    if not isinstance(given, dict):
        issues.append(Issue("missing field" if "input" not in record else "wrong type", field="input",
                            expected="an object with messages (and tools)", found=describe(given)))
        return None, issues
    prompt = _messages(given.get("messages"), "input.messages", issues)
    tools = read_tools(given, issues, json_text=True)
    chosen = _output_messages(decode_cell(record.get("preferred_output"), tabular), "preferred_output", issues)
    rejected = _output_messages(decode_cell(record.get("non_preferred_output"), tabular),
                                "non_preferred_output", issues)
    return _finish(prompt, {"chosen": chosen, "rejected": rejected}, tools, issues)


def _sharegpt_prompt(record: Mapping[str, Any], tabular: bool,
                     issues: list[Issue]) -> tuple[list[Row] | None, list[Any] | None]:
    """The messages of a ShareGPT conversation that a gpt answer would follow, and the row's tools."""
    # The existing reading of ShareGPT rows (roles, system column, tools) checks whole
    # conversations, which end on an answer: it reads this one with a stand-in answer.
    turns = decode_cell(record.get("conversations"), tabular)
    stand_in = {"from": "gpt", "value": "-"}
    whole = {**record, "conversations": [*turns, stand_in] if isinstance(turns, list) and turns else turns}
    row, found = normalise_sharegpt(whole, tabular)
    issues.extend(found)
    if row is None:
        return None, None
    prompt = row["messages"][:-1]
    if prompt[-1]["role"] not in ("user", "tool"):
        issues.append(Issue("the conversation does not end on a human turn", field="conversations",
                            expected="a last turn from human (or observation) before the answers",
                            found=f"a last turn of role {prompt[-1]['role']}"))
        return None, None
    return prompt, row.get("tools")


def _normalise_sharegpt_preference(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """LLaMA-Factory's ShareGPT ranking rows: conversations ending on a human turn, chosen and rejected gpt turns."""
    issues: list[Issue] = []
    chosen = sharegpt_turn(decode_cell(record.get("chosen"), tabular), "chosen", issues)
    rejected = sharegpt_turn(decode_cell(record.get("rejected"), tabular), "rejected", issues)
    prompt, tools = _sharegpt_prompt(record, tabular, issues)
    if issues or chosen is None or rejected is None:
        return None, issues
    return _finish(prompt, {"chosen": [chosen], "rejected": [rejected]}, tools, issues)


def _alpaca_prompt(record: Mapping[str, Any], tabular: bool, output: Any,
                   issues: list[Issue]) -> tuple[list[Row] | None, Row | None]:
    """An Alpaca row's messages before the answer (the existing Alpaca reading), and its answer message."""
    # The answer is read where the Alpaca reading looks for it; a row without one stays without.
    fields = {key: value for key, value in record.items() if key != "output"}
    row, found = normalise_alpaca({**fields, "output": output} if output is not _ABSENT else fields, tabular)
    issues.extend(found)
    if row is None:
        return None, None
    return row["messages"][:-1], row["messages"][-1]


def _normalise_alpaca_preference(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """LLaMA-Factory's Alpaca ranking rows: instruction, input, system, history, chosen and rejected text."""
    issues: list[Issue] = []
    rejected = read_text(record, "rejected", issues)
    prompt, chosen = _alpaca_prompt(record, tabular, record.get("chosen", _ABSENT), issues)
    # The Alpaca reading names the answer `output`: here it is `chosen`.
    issues[:] = [Issue(i.message, field="chosen", expected=i.expected, found=i.found)
                 if i.field == "output" else i for i in issues]
    if issues or prompt is None or chosen is None or rejected is None:
        return None, issues
    return _finish(prompt, {"chosen": [chosen], "rejected": [{"role": "assistant", "content": rejected}]},
                   None, issues)


def _flag(record: Mapping[str, Any], key: str, issues: list[Issue]) -> bool | None:
    """A desirable/undesirable mark: a boolean, its text (CSV), or 1/0."""
    value = record.get(key)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    issues.append(Issue("missing field" if key not in record else "wrong type", field=key,
                        expected="true (desirable) or false (undesirable); 1 and 0 are read the same way",
                        found=describe(value) if key in record else "nothing"))
    return None


def _normalise_unpaired(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """TRL's unpaired preference (KTO) rows: prompt, completion and a true/false label."""
    issues: list[Issue] = []
    tools = read_tools(record, issues, json_text=True)
    prompt = _side(record, "prompt", tabular, issues)
    completion = _side(record, "completion", tabular, issues)
    label = _flag(record, "label", issues)
    return _finish(prompt, {"completion": completion}, tools, issues, {"label": label})


def _normalise_sharegpt_kto(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """LLaMA-Factory's ShareGPT KTO rows: the last gpt turn is the completion, `kto_tag` its mark."""
    issues: list[Issue] = []
    label = _flag(record, "kto_tag", issues)
    row, found = normalise_sharegpt(record, tabular)
    issues.extend(found)
    if row is None or label is None:
        return None, issues
    return _last_turn_marked(row, "conversations", "kto_tag", issues, label)


def _normalise_alpaca_kto(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """LLaMA-Factory's Alpaca KTO rows: `output` is the completion, `kto_tag` its mark."""
    issues: list[Issue] = []
    label = _flag(record, "kto_tag", issues)
    prompt, completion = _alpaca_prompt(record, tabular, record.get("output", _ABSENT), issues)
    if issues or prompt is None or completion is None:
        return None, issues
    return _finish(prompt, {"completion": [completion]}, None, issues, {"label": label})


def _normalise_chat_kto(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """Chat rows with a true/false `label` (LLaMA-Factory's KTO demo): the last assistant turn is the completion."""
    issues: list[Issue] = []
    label = _flag(record, "label", issues)
    row, found = normalise_chat({key: value for key, value in record.items() if key != "label"}, tabular)
    issues.extend(found)
    if row is None or label is None:
        return None, issues
    return _last_turn_marked(row, "messages", "label", issues, label)


def _last_turn_marked(
    row: Row, field: str, mark: str, issues: list[Issue], label: bool
) -> tuple[Row | None, list[Issue]]:
    """An unpaired row from a conversation whose last (assistant) turn is the completion `mark` labels."""
    messages = row["messages"]
    if len(messages) < 2 or messages[-1]["role"] != "assistant":
        issues.append(Issue("the conversation does not end on an assistant turn", field=field,
                            expected=f"a prompt, then the assistant turn that {mark} marks",
                            found="roles " + ", ".join(m["role"] for m in messages)))
        return None, issues
    return _finish(messages[:-1], {"completion": messages[-1:]}, row.get("tools"), issues, {"label": label})


PREFERENCE_NORMALISERS: Final[dict[str, Normaliser]] = {
    "preference": _normalise_trl,
    "openai_preference": _normalise_openai,
    "sharegpt_preference": _normalise_sharegpt_preference,
    "alpaca_preference": _normalise_alpaca_preference,
    "unpaired_preference": _normalise_unpaired,
    "sharegpt_kto": _normalise_sharegpt_kto,
    "alpaca_kto": _normalise_alpaca_kto,
    "chat_kto": _normalise_chat_kto,
}
"""Each preference source format's check and conversion (see `registry.normalise`)."""


PREFERENCE_FIELDS: Final[tuple[str, ...]] = ("prompt", "chosen", "rejected", "completion")
"""The fields of canonical preference and unpaired preference rows that hold text, in reading order."""


def is_preference_row(row: Mapping[str, Any]) -> bool:
    """Whether a canonical row is a preference or an unpaired preference (KTO) row."""
    return "chosen" in row or ("completion" in row and "label" in row)
