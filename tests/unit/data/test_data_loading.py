"""Loading and line-level validation: formats detected and normalised, every bad row located."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.fixtures.data import (
    ALPACA_ROWS,
    CHAT_ROWS,
    PROMPT_COMPLETION_ROWS,
    ROWS_BY_FORMAT,
    write_jsonl,
)
from tunedeck.core.errors import DataError
from tunedeck.data.formats.instruction import ALPACA_PREAMBLE, ALPACA_PREAMBLE_WITH_INPUT
from tunedeck.data.formats.registry import KIND_OF_FORMAT
from tunedeck.data.loading import load_dataset
from tunedeck.data.validation import validate_file

FORMAT_FIXTURES = {
    "text": "text_file",
    "prompt_completion": "prompt_completion_file",
    "chat": "chat_file",
    "alpaca": "alpaca_file",
    "sharegpt": "sharegpt_file",
    "classification": "classification_file",
    "extraction": "extraction_file",
}


@pytest.mark.parametrize("source_format", sorted(FORMAT_FIXTURES))
def test_each_fixture_is_detected_and_normalised(source_format: str, request: pytest.FixtureRequest) -> None:
    path: Path = request.getfixturevalue(FORMAT_FIXTURES[source_format])
    loaded = load_dataset(path)
    assert loaded.source_format == source_format
    assert loaded.kind == KIND_OF_FORMAT[source_format]
    assert len(loaded.rows) == len(ROWS_BY_FORMAT[source_format])
    assert loaded.line_numbers == list(range(1, len(loaded.rows) + 1))
    assert loaded.manifest.rows == len(loaded.rows)
    assert loaded.manifest.kind == loaded.kind and loaded.manifest.format == source_format
    assert len(loaded.manifest.sha256) == 64


def test_alpaca_becomes_chat_with_the_documented_plain_prompt(alpaca_file: Path) -> None:
    rows = load_dataset(alpaca_file).rows
    with_input, without_input, _, with_system = rows
    # The chat form, as LLaMA-Factory reads Alpaca: instruction and input joined by a newline.
    assert with_input["messages"] == [
        {"role": "user", "content": "Summarise the sentence.\nThe cat sat on the warm mat all afternoon."},
        {"role": "assistant", "content": ALPACA_ROWS[0]["output"]},
    ]
    assert with_system["messages"][0] == {"role": "system", "content": "You are courteous."}
    # The plain form, for a tokenizer without a chat template: the Stanford template.
    assert with_input["plain_prompt"].startswith(ALPACA_PREAMBLE_WITH_INPUT)
    assert "### Input:\nThe cat sat on the warm mat all afternoon." in with_input["plain_prompt"]
    assert with_input["plain_prompt"].endswith("### Response:\n")
    assert without_input["plain_prompt"].startswith(ALPACA_PREAMBLE)
    assert "### Input" not in without_input["plain_prompt"]
    assert with_system["plain_prompt"].startswith("You are courteous.\n\n### Instruction:\nAnswer politely.")


def test_sharegpt_becomes_chat_roles(sharegpt_file: Path) -> None:
    first = load_dataset(sharegpt_file).rows[0]["messages"]
    assert [m["role"] for m in first] == ["system", "user", "assistant"]
    assert first[2]["content"] == "Blue."


def test_chat_keeps_tool_calls(chat_file: Path) -> None:
    messages = load_dataset(chat_file).rows[1]["messages"]
    assert messages[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert messages[1]["content"] == ""
    assert messages[2] == {
        "role": "tool",
        "content": '{"temp_c": 18, "sky": "clear"}',
        "tool_call_id": "call_1",
    }


def test_extraction_schema_is_applied(tmp_path: Path, extraction_schema_file: Path) -> None:
    rows = [
        {
            "input": "Invoice 1 from X",
            "output": {"invoice_number": "1", "vendor": "X", "total": 3, "currency": "euro"},
        }
    ]
    path = write_jsonl(tmp_path / "bad_extraction.jsonl", rows)
    with pytest.raises(DataError) as caught:
        load_dataset(path, schema_path=extraction_schema_file)
    (issue,) = caught.value.issues
    assert issue.field == "output.currency" and issue.line == 1 and "pattern" in (issue.expected or "")


def test_explicit_format_override(tmp_path: Path) -> None:
    # A file whose rows carry both shapes: auto picks the most specific, the override picks what we ask.
    rows = [{"text": f"row {i}", "label": "a"} for i in range(3)]
    path = write_jsonl(tmp_path / "ambiguous.jsonl", rows)
    assert load_dataset(path).source_format == "classification"
    with pytest.raises(DataError) as caught:
        load_dataset(path, "text")
    assert all(issue.message == "row of another format mixed in" for issue in caught.value.issues)
    prompt_path = write_jsonl(tmp_path / "pc.jsonl", PROMPT_COMPLETION_ROWS)
    with pytest.raises(DataError) as caught:
        load_dataset(prompt_path, "chat")
    assert caught.value.issues[0].expected is not None and "chat" in caught.value.issues[0].expected


def test_same_content_same_hash_across_files(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "a.jsonl", PROMPT_COMPLETION_ROWS)
    reordered = [
        {"completion": r["completion"], "prompt": r["prompt"], "id": i}
        for i, r in enumerate(PROMPT_COMPLETION_ROWS)
    ]
    array = tmp_path / "b.json"
    array.write_text(json.dumps(reordered, indent=4), encoding="utf-8")
    with (tmp_path / "c.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["prompt", "completion"])
        writer.writeheader()
        writer.writerows(PROMPT_COMPLETION_ROWS)
    pq.write_table(pa.Table.from_pylist(PROMPT_COMPLETION_ROWS), tmp_path / "d.parquet")
    hashes = {
        load_dataset(p).manifest.sha256 for p in [jsonl, array, tmp_path / "c.csv", tmp_path / "d.parquet"]
    }
    assert len(hashes) == 1
    changed = write_jsonl(
        tmp_path / "e.jsonl", [*PROMPT_COMPLETION_ROWS[:-1], {"prompt": "x", "completion": "y"}]
    )
    assert load_dataset(changed).manifest.sha256 not in hashes


def test_csv_and_parquet_chat_and_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "chat.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["messages"])
        for row in CHAT_ROWS:
            writer.writerow([json.dumps(row["messages"])])
    loaded = load_dataset(path)
    assert loaded.kind == "chat" and loaded.line_numbers == [2, 3, 4, 5]
    pq.write_table(pa.Table.from_pylist([{"text": "a"}, {"text": " "}]), tmp_path / "t.parquet")
    with pytest.raises(DataError) as caught:
        load_dataset(tmp_path / "t.parquet")
    assert caught.value.issues[0].line == 2 and caught.value.issues[0].message == "empty text"


def test_malformed_jsonl_reports_lines_7_and_12_with_fields(tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in PROMPT_COMPLETION_ROWS * 2]  # 12 good lines
    lines[6] = '{"prompt": "unterminated", "completion": '
    lines[11] = json.dumps({"prompt": "ok", "completion": 42})
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_dataset(path)
    issues = caught.value.issues
    assert [(i.line, i.message) for i in issues] == [(7, "invalid JSON"), (12, "wrong type")]
    assert issues[1].field == "completion" and issues[1].found == "number 42"
    assert all(i.file == str(path) for i in issues)
    assert f"{path}:7" in str(caught.value) and f"{path}:12: completion" in str(caught.value)
    report = validate_file(path)
    assert not report.ok and report.rows_total == 12 and report.rows_valid == 10 and report.issue_count == 2


def test_drop_invalid_keeps_good_rows_and_says_which_were_dropped(tmp_path: Path) -> None:
    rows: list[object] = [*PROMPT_COMPLETION_ROWS]
    rows.insert(2, {"prompt": "   ", "completion": "x"})
    rows.append(["not", "an", "object"])
    path = write_jsonl(tmp_path / "some_bad.jsonl", rows)
    loaded = load_dataset(path, drop_invalid=True)
    assert len(loaded.rows) == len(PROMPT_COMPLETION_ROWS)
    assert loaded.dropped_lines == [3, 8]
    assert loaded.dropped[0].field == "prompt" and loaded.dropped[0].message == "empty text"
    assert loaded.manifest.dropped == 2
    assert 3 not in loaded.line_numbers and loaded.line_numbers[2] == 4


def test_csv_missing_its_column(tmp_path: Path) -> None:
    path = tmp_path / "missing.csv"
    path.write_text("prompt\nhello\nworld\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_dataset(path)
    assert caught.value.issues[0].line == 1 and "prompt" in (caught.value.issues[0].found or "")
    with pytest.raises(DataError) as caught:
        load_dataset(path, "prompt_completion", drop_invalid=True)
    (issue,) = caught.value.issues
    assert (
        issue.field == "completion"
        and issue.line == 1
        and issue.message == "column missing from the CSV header"
    )


def test_mixed_formats_are_reported_per_row(tmp_path: Path) -> None:
    rows = [*PROMPT_COMPLETION_ROWS[:3], CHAT_ROWS[2], PROMPT_COMPLETION_ROWS[3], {"text": "plain"}]
    path = write_jsonl(tmp_path / "mixed.jsonl", rows)
    with pytest.raises(DataError) as caught:
        load_dataset(path)
    assert [(i.line, i.message) for i in caught.value.issues] == [
        (4, "row of another format mixed in"),
        (6, "row of another format mixed in"),
    ]
    assert "chat" in (caught.value.issues[0].found or "")


def test_chat_errors_empty_assistant_unknown_role_no_assistant(tmp_path: Path) -> None:
    rows = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  "}]},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}]},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "bot", "value": "yo"}]},
    ]
    path = write_jsonl(tmp_path / "chat_bad.jsonl", rows)
    report = validate_file(path, "chat")
    found = [(i.line, i.field, i.message) for i in report.issues]
    assert found == [
        (1, "messages[1].content", "empty text"),
        (2, "messages[1].role", "unknown role"),
        (3, "messages", "no assistant turn"),
        (4, "format", "row of another format mixed in"),
    ]
    sharegpt = write_jsonl(tmp_path / "sg_bad.jsonl", [rows[3]])
    (issue,) = validate_file(sharegpt).issues
    assert issue.field == "conversations[1].from" and issue.found == 'string "bot"'


def test_non_utf8_bytes_are_located(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    good = [json.dumps(r).encode() for r in PROMPT_COMPLETION_ROWS[:3]]
    path.write_bytes(
        b"\n".join([good[0], '{"prompt": "café", "completion": "x"}'.encode("latin-1"), *good[1:]])
    )
    with pytest.raises(DataError) as caught:
        load_dataset(path)
    (issue,) = caught.value.issues
    assert issue.line == 2 and issue.expected == "UTF-8 text" and "0xe9" in (issue.found or "")
    csv_path = tmp_path / "latin1.csv"
    csv_path.write_bytes(b"text\nfine\ncaf\xe9\n")
    (issue,) = validate_file(csv_path).issues
    assert issue.line == 3


def test_oversize_row_is_reported(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "big.jsonl", [{"text": "short"}, {"text": "x" * 500}])
    report = validate_file(path, max_row_bytes=200)
    (issue,) = report.issues
    assert issue.line == 2 and issue.message == "row too large" and issue.expected == "at most 200 bytes"


def test_issue_cap_counts_everything_but_lists_only_the_cap(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "many_bad.jsonl", [{"text": ""} for _ in range(30)])
    report = validate_file(path, max_issues=5)
    assert report.issue_count == 30 and len(report.issues) == 5
    with pytest.raises(DataError) as caught:
        load_dataset(path, max_issues=5)
    assert len(caught.value.issues) == 5 and "30 issue(s)" in caught.value.title


def test_missing_empty_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(DataError) as caught:
        load_dataset(tmp_path / "nope.jsonl")
    assert caught.value.issues[0].file == str(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataError, match="no rows"):
        load_dataset(tmp_path / "empty.jsonl")
    broken = tmp_path / "broken.json"
    broken.write_text('[\n {"text": "a"},\n {"text": "b",\n', encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_dataset(broken, drop_invalid=True)  # the rest of the array is unreadable: never silently cut
    assert caught.value.issues[-1].message == "invalid JSON"
    with pytest.raises(DataError) as caught:
        load_dataset(tmp_path / "data.xlsx")
    assert caught.value.issues[0].found == ".xlsx"
