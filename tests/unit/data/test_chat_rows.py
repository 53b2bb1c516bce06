"""Chat-family rows (OpenAI chat, ShareGPT) train exactly what their authors meant, token by token.

Each test normalises raw rows, tokenizes them as training does, and compares every token id and
label with an expectation built from the rendered text split into trained and masked segments.
Segments end at the template's special tokens or newlines, where the tokenizer never merges
across, so tokenizing them one by one gives the same ids as tokenizing the whole text.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.formats.registry import normalise
from tunedeck.data.loading import load_dataset
from tunedeck.data.tokenize import IGNORE_INDEX, TokenizedRows, encode_rows, tokenize_rows
from tunedeck.demo.tiny_corpus import builtin_corpus
from tunedeck.demo.tiny_models import CHAT_TEMPLATE, build_tokenizer

# The tiny template with the tool definitions rendered as a system block, as real templates do.
TOOLS_TEMPLATE = CHAT_TEMPLATE.replace(
    "{{ bos_token }}",
    "{{ bos_token }}{% if tools %}{{ '<|system|>\ntools: ' + tools | tojson + '<|end|>\n' }}{% endif %}",
    1,
)
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
Segments = list[tuple[str, bool]]  # (rendered text, trained)


@pytest.fixture(scope="module")
def marked() -> Any:
    tok = build_tokenizer(builtin_corpus(), "llama")
    tok.chat_template = TOOLS_TEMPLATE
    return tok


@pytest.fixture(scope="module")
def unmarked(marked: Any) -> Any:
    """The same template without {% generation %} markers: masks come from incremental rendering."""
    tok = copy.deepcopy(marked)
    tok.chat_template = TOOLS_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    return tok


def canonical(raw: dict[str, Any], source_format: str = "chat") -> dict[str, Any]:
    row, issues = normalise(raw, source_format)
    assert not issues, issues
    assert row is not None
    return row


def issues_of(raw: dict[str, Any], source_format: str = "chat") -> list[Issue]:
    row, issues = normalise(raw, source_format)
    assert row is None and issues
    return issues


def expected(tok: Any, segments: Segments) -> list[tuple[int, int]]:
    """(token id, label) of every token of the segments, in order."""
    pairs: list[tuple[int, int]] = []
    for text, trained in segments:
        for token in tok(text, add_special_tokens=False)["input_ids"]:
            pairs.append((token, token if trained else IGNORE_INDEX))
    return pairs


def actual(tokenized: TokenizedRows, row: int) -> list[tuple[int, int]]:
    return list(zip(tokenized.input_ids[row], tokenized.labels[row], strict=True))


def all_paths(marked: Any, unmarked: Any, rows: list[dict[str, Any]]) -> list[TokenizedRows]:
    """The rows tokenized by generation markers, by incremental rendering, and forced incremental."""
    outs = [
        tokenize_rows(rows, "chat", marked, max_length=512),
        tokenize_rows(rows, "chat", unmarked, max_length=512),
        encode_rows(rows, "chat", marked, max_length=512, force_incremental_chat=True),
    ]
    assert [out.chat_mask_method for out in outs] == [
        "generation_markers", "incremental_rendering", "incremental_rendering"]
    return outs


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """How the tiny template writes a tool call (transformers' tojson keeps non-ASCII)."""
    return "<|tool_call|>" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def test_tools_reach_the_template_per_conversation_and_arguments_are_decoded(marked: Any, unmarked: Any) -> None:
    with_tools = canonical({
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Weather in Lyon?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
            {"role": "assistant", "content": "It is 18 C."},
        ],
    })
    assert with_tools["tools"] == [WEATHER_TOOL]
    assert with_tools["messages"][1]["tool_calls"][0]["function"]["arguments"] == {"city": "Lyon"}
    without = canonical({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]})
    assert "tools" not in without
    tools_block = "<|system|>\ntools: " + json.dumps([WEATHER_TOOL], ensure_ascii=False) + "<|end|>\n"
    first: Segments = [
        ("<s>", False),
        (tools_block, False),
        ("<|user|>\nWeather in Lyon?<|end|>\n<|assistant|>\n", False),
        (call_text("get_weather", {"city": "Lyon"}) + "<|end|>", True),
        ("\n<|tool|>\n18 C<|end|>\n<|assistant|>\n", False),
        ("It is 18 C.<|end|>", True),
        ("\n", False),
    ]
    second: Segments = [("<s><|user|>\nHi<|end|>\n<|assistant|>\n", False), ("Hello.<|end|>", True), ("\n", False)]
    # Rows with and without tools in one batch: each renders with its own tools.
    for out in all_paths(marked, unmarked, [with_tools, without, with_tools]):
        assert actual(out, 0) == expected(marked, first) == actual(out, 2)
        assert actual(out, 1) == expected(marked, second)
    assert marked.decode(all_paths(marked, unmarked, [with_tools])[0].input_ids[0]) == "".join(
        text for text, _ in first)


def test_weight_zero_turns_are_shown_but_not_trained(marked: Any, unmarked: Any) -> None:
    row = canonical({"messages": [
        {"role": "user", "content": "Say hello"},
        {"role": "assistant", "content": "Hello there!", "weight": 0},
        {"role": "user", "content": "Name a colour"},
        {"role": "assistant", "content": "Blue.", "weight": 1},
        {"role": "user", "content": "Another?"},
        {"role": "assistant", "content": "Red."},
    ]})
    assert [m.get("weight") for m in row["messages"]] == [None, 0, None, 1, None, None]
    segments: Segments = [
        ("<s><|user|>\nSay hello<|end|>\n<|assistant|>\n", False),
        ("Hello there!<|end|>", False),
        ("\n<|user|>\nName a colour<|end|>\n<|assistant|>\n", False),
        ("Blue.<|end|>", True),
        ("\n<|user|>\nAnother?<|end|>\n<|assistant|>\n", False),
        ("Red.<|end|>", True),
        ("\n", False),
    ]
    for out in all_paths(marked, unmarked, [row]):
        assert actual(out, 0) == expected(marked, segments)


def test_weight_with_markers_that_split_a_turn_is_refused(marked: Any) -> None:
    tok = copy.deepcopy(marked)
    # Two marked runs per assistant turn: they cannot be matched to turns one to one.
    tok.chat_template = TOOLS_TEMPLATE.replace(
        "{{ '<|end|>' }}{% endgeneration %}", "{% endgeneration %}{{ ' ' }}{% generation %}{{ '<|end|>' }}"
        "{% endgeneration %}")
    row = canonical({"messages": [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "weight": 0},
        {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"},
    ]})
    with pytest.raises(DataError, match="marks 4 answer spans for 2 assistant turns"):
        tokenize_rows([row], "chat", tok, max_length=512)
    row["messages"][1].pop("weight")  # without weights the template's own marks are used as they are
    assert tokenize_rows([row], "chat", tok, max_length=512).report.refused_rows == []


@pytest.mark.parametrize(("message", "field", "expected_text"), [
    ({"role": "assistant", "content": "x", "weight": 2}, "messages[1].weight", "0 or 1"),
    ({"role": "assistant", "content": "x", "weight": "1"}, "messages[1].weight", "0 or 1"),
    ({"role": "assistant", "content": "x", "weight": True}, "messages[1].weight", "0 or 1"),
    ({"role": "user", "content": "x", "weight": 0}, "messages[1].weight", "assistant messages only"),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{city: Lyon}"}}]},
     "messages[1].tool_calls[0].function.arguments", "JSON object"),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "[1]"}}]},
     "messages[1].tool_calls[0].function.arguments", "JSON object"),
    ({"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "nope"}},
     "messages[1].function_call.arguments", "JSON object"),
    ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]},
     "messages[1].content[0].type", '"text" parts only'),
    ({"role": "user", "content": ["plain"]}, "messages[1].content[0]", "part"),
    ({"role": "function", "content": "18 C"}, "messages[1].name", "non-empty string"),
])
def test_bad_messages_are_row_errors_naming_the_field(
    message: dict[str, Any], field: str, expected_text: str
) -> None:
    raw = {"messages": [{"role": "user", "content": "hi"}, message,
                        {"role": "assistant", "content": "ok"}]}
    issues = issues_of(raw)
    assert [issue.field for issue in issues] == [field]
    assert expected_text in (issues[0].expected or "")


def test_multimodal_part_says_so() -> None:
    (issue,) = issues_of({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                     {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]},
        {"role": "assistant", "content": "A cat."}]})
    assert issue.message == "multimodal rows are not supported for supervised training"
    assert issue.found == 'string "image_url"'


def test_bad_tools_and_all_weights_zero_are_row_errors() -> None:
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]
    for tools in ({"name": "f"}, ["f"], '[{"type": "function"}]'):
        (issue,) = issues_of({"tools": tools, "messages": chat})
        assert issue.field == "tools" and "list of tool definitions" in (issue.expected or "")
    (issue,) = issues_of({"messages": [chat[0], {**chat[1], "weight": 0}]})
    assert issue.message == "no trained assistant turn"


def test_content_parts_developer_and_legacy_function_messages(marked: Any, unmarked: Any) -> None:
    row = canonical({"messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather "}, {"type": "text", "text": "in Lyon?"}]},
        {"role": "assistant", "content": None,
         "function_call": {"name": "get_weather", "arguments": '{"city": "Lyon"}'}},
        {"role": "function", "name": "get_weather", "content": "18 C"},
        {"role": "assistant", "content": [{"type": "text", "text": "It is 18 C."}]},
    ]})
    assert row["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Lyon?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lyon"}}}]},
        {"role": "tool", "content": "18 C", "name": "get_weather"},
        {"role": "assistant", "content": "It is 18 C."},
    ]
    segments: Segments = [
        ("<s><|system|>\nBe brief.<|end|>\n<|user|>\nWeather in Lyon?<|end|>\n<|assistant|>\n", False),
        (call_text("get_weather", {"city": "Lyon"}) + "<|end|>", True),
        ("\n<|tool|>\n18 C<|end|>\n<|assistant|>\n", False),
        ("It is 18 C.<|end|>", True),
        ("\n", False),
    ]
    for out in all_paths(marked, unmarked, [row]):
        assert actual(out, 0) == expected(marked, segments)


def test_sharegpt_as_llama_factory_writes_it(marked: Any, unmarked: Any) -> None:
    raw = {
        "system": "Use tools when needed.",
        "tools": json.dumps([WEATHER_TOOL["function"]]),
        "conversations": [
            {"from": "human", "value": "Weather in Lyon?"},
            {"from": "function_call", "value": '{"name": "get_weather", "arguments": {"city": "Lyon"}}'},
            {"from": "observation", "value": "18 C"},
            {"from": "gpt", "value": "It is 18 C."},
        ],
    }
    row = canonical(raw, "sharegpt")
    assert row == {
        "messages": [
            {"role": "system", "content": "Use tools when needed."},
            {"role": "user", "content": "Weather in Lyon?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lyon"}}}]},
            {"role": "tool", "content": "18 C"},
            {"role": "assistant", "content": "It is 18 C."},
        ],
        "tools": [WEATHER_TOOL["function"]],
    }
    segments: Segments = [
        ("<s>", False),
        ("<|system|>\ntools: " + json.dumps([WEATHER_TOOL["function"]], ensure_ascii=False) + "<|end|>\n", False),
        ("<|system|>\nUse tools when needed.<|end|>\n<|user|>\nWeather in Lyon?<|end|>\n<|assistant|>\n", False),
        (call_text("get_weather", {"city": "Lyon"}) + "<|end|>", True),
        ("\n<|tool|>\n18 C<|end|>\n<|assistant|>\n", False),
        ("It is 18 C.<|end|>", True),
        ("\n", False),
    ]
    for out in all_paths(marked, unmarked, [row]):
        assert actual(out, 0) == expected(marked, segments)


def test_sharegpt_with_role_content_items_and_parallel_calls() -> None:
    row = canonical({"conversations": [
        {"role": "user", "content": "Weather in Lyon and Nice?"},
        {"from": "function_call", "value": json.dumps([
            {"name": "get_weather", "arguments": {"city": "Lyon"}},
            {"name": "get_weather", "arguments": '{"city": "Nice"}'}])},
        {"role": "tool", "content": "18 C, 21 C"},
        {"role": "assistant", "content": "Warmer in Nice.", "weight": 1},
    ]}, "sharegpt")
    calls = row["messages"][1]["tool_calls"]
    assert [call["function"]["arguments"] for call in calls] == [{"city": "Lyon"}, {"city": "Nice"}]
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert "tools" not in canonical({"tools": "", "conversations": row["messages"]}, "sharegpt")


@pytest.mark.parametrize(("raw", "field", "message"), [
    ({"conversations": [{"from": "human", "value": "hi"}, {"from": "function_call", "value": "get_weather(Lyon)"}]},
     "conversations[1].value", "function call is not valid"),
    ({"conversations": [{"from": "human", "value": "hi"}, {"from": "function_call", "value": '{"name": "f"}'}]},
     "conversations[1].value", "function call is not valid"),
    ({"tools": "[{not json", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},
     "tools", "tools is not valid JSON"),
    ({"system": "A", "conversations": [{"from": "system", "value": "B"}, {"from": "human", "value": "hi"},
                                        {"from": "gpt", "value": "yo"}]},
     "system", "two system prompts"),
    ({"conversations": [{"from": "human", "value": "hi"}, {"from": "observation", "value": "x"}]},
     "conversations", "no assistant turn"),
])
def test_bad_sharegpt_rows_are_row_errors(raw: dict[str, Any], field: str, message: str) -> None:
    (issue,) = issues_of(raw, "sharegpt")
    assert issue.field == field and issue.message.startswith(message)


def test_csv_chat_rows_read_tools_from_json_cells(tmp_path: Path) -> None:
    path = tmp_path / "chats.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["messages", "tools"])
        chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok", "weight": 1}]
        writer.writerow([json.dumps(chat), json.dumps([WEATHER_TOOL])])
        writer.writerow([json.dumps(chat), ""])
    rows = load_dataset(path).rows
    assert rows[0]["tools"] == [WEATHER_TOOL] and "tools" not in rows[1]
    assert rows[0]["messages"][1] == {"role": "assistant", "content": "ok", "weight": 1}


def test_evaluation_prompts_render_as_training_did(marked: Any) -> None:
    from tunedeck.eval.decoding import build_prompts

    row = canonical({
        "tools": [WEATHER_TOOL],
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello.", "weight": 0},
            {"role": "user", "content": "Weather in Lyon?"},
            {"role": "assistant", "content": "Sunny."},
        ],
    })
    trained = tokenize_rows([row], "chat", marked, max_length=512)
    ids, labels = trained.input_ids[0], trained.labels[0]
    # Where the last trained run starts: the last answer.
    answer_start = max(i for i in range(1, len(labels)) if labels[i] != IGNORE_INDEX and labels[i - 1] == IGNORE_INDEX)
    (prompt,) = build_prompts([row], "chat", marked, max_length=512)
    # The evaluation prompt is the training row up to the last answer: same tools, no weight key.
    assert prompt.ids == ids[:answer_start] and prompt.reference == "Sunny."
