"""Row shapes: ignored fields reported, multimodal files refused, labels, TRL and Alpaca shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.fixtures.data import write_jsonl
from tunedeck.cli.main import app
from tunedeck.core.errors import DataError
from tunedeck.data.formats.classification import class_label
from tunedeck.data.formats.instruction import alpaca_prompt
from tunedeck.data.formats.registry import normalise, refusal
from tunedeck.data.ingest import UploadOptions, ingest_upload
from tunedeck.data.loading import load_dataset
from tunedeck.data.registry import DatasetRegistry
from tunedeck.data.validation import validate_file

runner = CliRunner()


def _csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- ignored fields -----------------------------------------------------------------------------


def test_ignored_fields_counted_by_name_in_report_and_cli(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"id": i, "prompt": f"q{i}", "completion": f"a{i}", **({"source": "web"} if i < 2 else {})}
        for i in range(5)
    ]
    path = write_jsonl(tmp_path / "pc.jsonl", rows)
    report = validate_file(path)
    assert report.ok and report.ignored_fields == {"id": 5, "source": 2}
    assert report.to_dict()["ignored_fields"] == {"id": 5, "source": 2}
    text = runner.invoke(app, ["data", "validate", str(path)])
    assert text.exit_code == 0 and "ignored fields: id (5 rows), source (2 rows)" in text.stdout
    as_json = json.loads(runner.invoke(app, ["data", "validate", str(path), "--json"]).stdout)
    assert as_json["ignored_fields"] == {"id": 5, "source": 2}
    root = tmp_path / "registry"
    registered = runner.invoke(app, ["data", "register", str(path), "--name", "pc", "--root", str(root)])
    assert registered.exit_code == 0 and "ignored fields: id (5 rows), source (2 rows)" in registered.stdout
    as_json = json.loads(
        runner.invoke(app, ["data", "register", str(path), "--name", "pc", "--root", str(root), "--json"]).stdout
    )
    assert as_json["ignored_fields"] == {"id": 5, "source": 2}
    assert as_json["manifest"]["notes"]["ignored_fields"] == {"id": 5, "source": 2}
    streamed = DatasetRegistry(tmp_path / "streamed").register(path, "pc")
    assert streamed.manifest.notes["ignored_fields"] == {"id": 5, "source": 2}


def test_known_fields_of_chat_and_sharegpt_are_not_reported(tmp_path: Path) -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], "tools": []}
    assert validate_file(write_jsonl(tmp_path / "c.jsonl", [chat])).ignored_fields == {}
    share = {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}], "system": "s"}
    assert validate_file(write_jsonl(tmp_path / "s.jsonl", [share])).ignored_fields == {}


def test_csv_falling_back_to_text_offers_the_label_column(tmp_path: Path) -> None:
    path = _csv(tmp_path / "spam.csv", "type,text\nham,hello there\nspam,win a prize\n")
    report = validate_file(path)
    assert report.source_format == "text" and report.ignored_fields == {"type": 2}
    assert report.hints == [
        "column `type` is ignored; for classification use `--format classification --label-column type`"
    ]
    result = runner.invoke(app, ["data", "validate", str(path)])
    assert "--format classification --label-column type" in result.stdout
    mapped = runner.invoke(
        app, ["data", "validate", str(path), "--format", "classification", "--label-column", "type", "--json"]
    )
    report_json = json.loads(mapped.stdout)
    assert mapped.exit_code == 0 and report_json["kind"] == "classification"
    assert report_json["ignored_fields"] == {} and report_json["hints"] == []
    loaded = load_dataset(path, label_column="type")  # auto + a label column means classification
    assert [r["label"] for r in loaded.rows] == ["ham", "spam"]
    # Only a field on every valid row, with a short value, looks like a label: not a typo on a bad row,
    # nor a long note on some rows.
    odd = write_jsonl(tmp_path / "odd.jsonl", [{"text": "a", "note": "x" * 200}, {"text": "b"}, {"tex": "c"}])
    odd_report = validate_file(odd)
    assert odd_report.ignored_fields == {"note": 1, "tex": 1} and odd_report.hints == []


def test_upload_ingestion_reports_ignored_fields_and_takes_a_label_column(tmp_path: Path) -> None:
    path = _csv(tmp_path / "spam.csv", "type,text\nham,hello there\nspam,win a prize\n")
    plain = ingest_upload(path, tmp_path / "a.jsonl", UploadOptions("spam.csv", 100), scratch=tmp_path / "s1")
    report = plain.reports["validation"]
    assert report["kind"] == "text" and report["ignored_fields"] == {"type": 2}
    assert "--label-column type" in report["hints"][0]
    options = UploadOptions("spam.csv", 100, label_column="type")
    labelled = ingest_upload(path, tmp_path / "b.jsonl", options, scratch=tmp_path / "s2")
    assert labelled.reports["validation"]["kind"] == "classification"
    assert [row["label"] for row in labelled.preview] == ["ham", "spam"]


def test_label_column_refused_for_other_formats(tmp_path: Path) -> None:
    path = _csv(tmp_path / "spam.csv", "type,text\nham,hello\n")
    result = runner.invoke(app, ["data", "validate", str(path), "--format", "text", "--label-column", "type"])
    assert result.exit_code == 1 and "a label column applies only to classification" in result.stderr
    assert "Traceback" not in result.output


# --- refusals -------------------------------------------------------------------------------------


_CHAT_PROMPT = [{"role": "user", "content": "q"}]
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "images": ({"messages": [*_CHAT_PROMPT, {"role": "assistant", "content": "a"}], "images": ["a.png"]},
               "multimodal dataset (field images)"),
    "llava": ({"image": "a.png", "conversations": [{"from": "human", "value": "<image>\nwhat?"},
                                                     {"from": "gpt", "value": "a cat"}]},
              "multimodal dataset (field image)"),
    "content-parts": ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}},
                                                                {"type": "text", "text": "what?"}]},
                                    {"role": "assistant", "content": "a cat"}]},
                      "multimodal dataset (field messages[].content)"),
}  # fmt: skip


@pytest.mark.parametrize("shape", sorted(REFUSED))
def test_refused_files_fail_once_with_the_reason(tmp_path: Path, shape: str) -> None:
    row, reason = REFUSED[shape]
    path = write_jsonl(tmp_path / f"{shape}.jsonl", [row] * 300)
    report = validate_file(path)
    assert not report.ok and report.issue_count == 1 and report.rows_valid == 0
    issue = report.issues[0]
    assert reason in issue.message and issue.file == str(path) and issue.line == 1
    with pytest.raises(DataError):
        load_dataset(path, drop_invalid=True)
    with pytest.raises(DataError):
        load_dataset(path, "chat", drop_invalid=True)
    with pytest.raises(DataError):
        DatasetRegistry(tmp_path / "r").register(path, "x", drop_invalid=True)
    result = runner.invoke(app, ["data", "register", str(path), "--name", "x", "--root", str(tmp_path / "r")])
    assert result.exit_code == 1 and reason in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "r" / "x").exists()
    validated = runner.invoke(app, ["data", "validate", str(path)])
    assert validated.exit_code == 1 and "1 issue(s), file refused" in validated.stderr


def test_not_refused_lookalikes() -> None:
    assert refusal({"prompt": "q", "completion": "a", "label": "positive"}) is None  # a label, not KTO
    assert refusal({"text": "see <image> here"}) is None  # a placeholder alone names no media
    assert refusal({"text": "t", "images": []}) is None


def test_preference_and_kto_files_are_no_longer_refused(tmp_path: Path) -> None:
    """They are read as preference rows (see test_preference_formats), which the sft task refuses by kind."""
    path = _csv(tmp_path / "kto.csv", "prompt,completion,label\nq,a,True\nq,b,False\n")
    report = validate_file(path)
    assert report.ok and report.kind == "unpaired_preference"
    assert refusal({"prompt": "q", "chosen": "good", "rejected": "bad"}) is None
    assert refusal({"input": {"messages": _CHAT_PROMPT}, "preferred_output": [], "non_preferred_output": []}) is None


# --- TRL conversational prompt/completion ------------------------------------------------------


def test_conversational_prompt_completion_becomes_chat(tmp_path: Path) -> None:
    row = {
        "prompt": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "earlier answer"},
            {"role": "user", "content": "and now?"},
        ],
        "completion": [{"role": "assistant", "content": "now this"}],
    }
    canonical, issues = normalise(row, "prompt_completion")
    assert not issues
    assert canonical == {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "earlier answer", "weight": 0},
            {"role": "user", "content": "and now?"},
            {"role": "assistant", "content": "now this"},
        ]
    }
    loaded = load_dataset(write_jsonl(tmp_path / "conv.jsonl", [row, row]))
    assert loaded.kind == "chat" and loaded.source_format == "prompt_completion"


def test_conversational_prompt_completion_in_csv(tmp_path: Path) -> None:
    prompt = json.dumps([{"role": "user", "content": "q"}]).replace('"', '""')
    completion = json.dumps([{"role": "assistant", "content": "a"}]).replace('"', '""')
    path = _csv(tmp_path / "conv.csv", f'prompt,completion\n"{prompt}","{completion}"\n"[INST] hi","[ok]"\n')
    report = validate_file(path)
    assert report.kind == "chat" and report.rows_valid == 1 and report.issues[0].line == 3


def test_conversational_prompt_completion_errors_name_the_field(tmp_path: Path) -> None:
    no_assistant = {"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "user", "content": "x"}]}
    _, issues = normalise(no_assistant, "prompt_completion")
    assert issues[0].message == "no assistant turn in the completion" and issues[0].field == "completion"
    bad_role = {"prompt": [{"role": "user", "content": "q"}],
                "completion": [{"role": "assistant", "content": "a"}, {"role": "robot", "content": "b"}]}
    _, issues = normalise(bad_role, "prompt_completion")
    assert issues[0].field == "completion[1].role"
    mixed_types = {"prompt": "q", "completion": [{"role": "assistant", "content": "a"}]}
    _, issues = normalise(mixed_types, "prompt_completion")
    assert issues[0].field == "prompt" and issues[0].message == "wrong type"
    plain = {"prompt": "q", "completion": "a"}
    path = write_jsonl(tmp_path / "mixed.jsonl", [{"prompt": [{"role": "user", "content": "q"}],
                                                  "completion": [{"role": "assistant", "content": "a"}]}, plain])
    report = validate_file(path)
    assert report.rows_valid == 1 and report.issues[0].line == 2
    assert report.issues[0].message == "prompt/completion rows of two shapes in one file"


# --- classification labels ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tabular", "expected"),
    [(1, False, "1"), (1.0, False, "1"), ("1", False, "1"), (True, False, "true"), (False, False, "false"),
     ("1.0", True, "1"), ("True", True, "true"), (" spam ", False, "spam"), ("1.0", False, "1.0")],
)  # fmt: skip
def test_class_labels(value: object, tabular: bool, expected: str) -> None:
    assert class_label(value, tabular) == (expected, None)


def test_non_integral_label_refused_with_reason(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cls.jsonl", [{"text": "a", "label": 1}, {"text": "b", "label": 0.5}])
    report = validate_file(path)
    assert report.rows_valid == 1 and report.issues[0].line == 2 and report.issues[0].field == "label"
    assert "not whole" in report.issues[0].message and report.issues[0].found == "number 0.5"


def test_one_class_whatever_the_spelling(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "cls.jsonl",
        [{"text": "a", "label": 1}, {"text": "b", "label": 1.0}, {"text": "c", "label": "1"},
         {"text": "d", "label": True}],
    )  # fmt: skip
    assert [r["label"] for r in load_dataset(path).rows] == ["1", "1", "1", "true"]


# --- Alpaca -------------------------------------------------------------------------------------


def test_alpaca_history_becomes_chat(tmp_path: Path) -> None:
    row = {
        "system": "you are terse",
        "instruction": "and 3+3?",
        "input": "answer in digits",
        "output": "6",
        "history": [["1+1?", "2"], ["2+2?", "4"]],
    }
    canonical, issues = normalise(row, "alpaca")
    assert not issues
    assert canonical == {
        "messages": [
            {"role": "system", "content": "you are terse"},
            {"role": "user", "content": "1+1?"},
            {"role": "assistant", "content": "2"},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "and 3+3?\nanswer in digits"},
            {"role": "assistant", "content": "6"},
        ]
    }
    empty = {"instruction": "hi", "output": "yo", "history": []}
    path = write_jsonl(tmp_path / "a.jsonl", [row, empty])
    loaded = load_dataset(path)
    # An empty history is no history: the row keeps its plain (Stanford) prompt as well.
    assert loaded.kind == "chat" and loaded.rows[1] == {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        "plain_prompt": alpaca_prompt("hi"),
    }


def test_alpaca_history_errors(tmp_path: Path) -> None:
    _, issues = normalise({"instruction": "i", "output": "o", "history": [["only one"]]}, "alpaca")
    assert issues[0].field == "history[0]" and "pair" in (issues[0].expected or "")
    path = write_jsonl(
        tmp_path / "a.jsonl",
        [{"instruction": "i", "output": "o"}, {"instruction": "i", "output": "o", "history": [["a", "b"]]}],
    )
    # Rows with and without history are all chat rows: one file may mix them.
    report = validate_file(path)
    assert report.rows_valid == 2 and report.kind == "chat" and not report.issues


def test_alpaca_null_input_and_system_are_empty() -> None:
    canonical, issues = normalise({"instruction": "i", "input": None, "system": None, "output": "o"}, "alpaca")
    assert not issues and canonical is not None
    plain, _ = normalise({"instruction": "i", "output": "o"}, "alpaca")
    assert canonical == plain


def test_a_one_line_object_wrapping_the_rows_says_where_they_are(tmp_path: Path) -> None:
    path = tmp_path / "wrapped.json"
    path.write_text(json.dumps({"data": [{"text": "a"}, {"text": "b"}]}) + "\n", encoding="utf-8")
    report = validate_file(path)
    assert not report.ok
    assert "its field `data` holds a list of 2 objects" in report.issues[0].message


def test_canonical_alpaca_rows_read_back_unchanged(tmp_path: Path) -> None:
    # Registered data is stored as canonical rows and read back as chat rows: the plain form survives,
    # so a model without a chat template still trains on the Stanford prompt, and the hash is unchanged.
    source = load_dataset(write_jsonl(tmp_path / "a.jsonl", [
        {"instruction": "Add.", "input": "1 and 2", "output": "3", "system": "Be brief."},
        {"instruction": "Greet.", "output": "Hi."},
    ]))
    again = load_dataset(write_jsonl(tmp_path / "canonical.jsonl", source.rows))
    assert again.rows == source.rows and again.kind == "chat" and again.source_format == "chat"
    assert again.manifest.sha256 == source.manifest.sha256
    assert source.rows[1]["plain_prompt"] == alpaca_prompt("Greet.")


def test_plain_prompt_only_fits_a_single_exchange() -> None:
    two_turns = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                 {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]
    _, issues = normalise({"messages": two_turns, "plain_prompt": "p"}, "chat")
    assert issues and issues[0].field == "plain_prompt" and "single exchange" in issues[0].message
    _, issues = normalise({"messages": two_turns[:2], "plain_prompt": 3}, "chat")
    assert issues and issues[0].field == "plain_prompt" and issues[0].expected == "a non-empty string"
