"""Column mappings: `--map target=source` renames a file's fields before its rows are read, and is kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.data import write_jsonl
from tunedeck.cli.main import app
from tunedeck.core.column_map import ColumnMapError, format_column_map, parse_column_map
from tunedeck.core.errors import DataError
from tunedeck.data.ingest import UploadOptions, ingest_upload
from tunedeck.data.loading import load_dataset
from tunedeck.data.registry import DatasetRegistry
from tunedeck.data.validation import validate_file

runner = CliRunner()
QA = [
    {"question": "What is 2+2?", "answer": "4", "id": 1},
    {"question": "Capital of France?", "answer": "Paris", "id": 2},
]


def _qa(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "qa.jsonl", QA)


def _sentences(tmp_path: Path) -> Path:
    path = tmp_path / "reviews.csv"
    path.write_text("sentence,category\ngreat film,pos\ndull plot,neg\n", encoding="utf-8")
    return path


def test_parse_reads_pairs_and_round_trips() -> None:
    assert parse_column_map(" instruction = question ,output=answer") == {"instruction": "question", "output": "answer"}
    assert parse_column_map("a=b,b=a") == {"a": "b", "b": "a"}  # a swap is two renames
    assert format_column_map(parse_column_map("text=sentence,label=category")) == "text=sentence,label=category"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("instruction", "has no '='"),
        ("instruction=question,", "has no '='"),
        ("=question", "empty target"),
        ("instruction= ", "empty source"),
        ("a=b=c", "more than one '='"),
        ("output=answer,output=reply", "named twice"),
    ],
)
def test_parse_refuses_malformed_maps(text: str, said: str) -> None:
    with pytest.raises(ColumnMapError, match=said):
        parse_column_map(text)


def test_cli_validate_and_register_alpaca_from_question_answer(tmp_path: Path) -> None:
    path, root = _qa(tmp_path), tmp_path / "registry"
    mapping = ["--map", "instruction=question,output=answer"]
    valid = runner.invoke(app, ["data", "validate", str(path), *mapping, "--json"])
    assert valid.exit_code == 0, valid.output
    report = json.loads(valid.stdout)
    assert report["format"] == "alpaca" and report["rows_valid"] == 2
    assert report["column_map"] == {"instruction": "question", "output": "answer"}
    assert report["ignored_fields"] == {"id": 2}  # the file's own name, not a mapped one
    registered = runner.invoke(app, ["data", "register", str(path), "--name", "qa", "--root", str(root), *mapping])
    assert registered.exit_code == 0, registered.output
    assert "column mapping: instruction=question,output=answer" in registered.stdout
    version = DatasetRegistry(root).get("qa")
    assert version.manifest.notes["column_map"] == {"instruction": "question", "output": "answer"}
    row = next(version.iter_rows())
    # Alpaca rows are stored as chat rows (the model's own template renders them).
    assert row["messages"][0]["content"].startswith("What is 2+2?") and row["messages"][-1]["content"] == "4"


def test_cli_classification_from_sentence_and_category(tmp_path: Path) -> None:
    path = _sentences(tmp_path)
    result = runner.invoke(app, ["data", "validate", str(path), "--map", "text=sentence,label=category", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "classification"
    # A label column is the mapping label=NAME: the same rows, the same recorded mapping.
    mapped = load_dataset(path, column_map={"text": "sentence", "label": "category"})
    labelled = load_dataset(path, column_map={"text": "sentence"}, label_column="category")
    assert mapped.rows == labelled.rows and [r["label"] for r in mapped.rows] == ["pos", "neg"]
    assert labelled.column_map == {"text": "sentence", "label": "category"}


@pytest.mark.parametrize("text", ["instruction", "=question", "a=b,a=c"])
def test_cli_refuses_a_malformed_map_naming_the_option(tmp_path: Path, text: str) -> None:
    result = runner.invoke(app, ["data", "validate", str(_qa(tmp_path)), "--map", text])
    assert result.exit_code == 2
    assert "--map" in result.output and "Traceback" not in result.output


def test_a_mapped_field_missing_from_every_row_is_reported(tmp_path: Path) -> None:
    path = _qa(tmp_path)
    # Optional for Alpaca: the rows are valid, yet the mapping named a field the file does not have.
    report = validate_file(path, column_map={"instruction": "question", "output": "answer", "input": "context"})
    assert not report.ok
    [issue] = report.issues
    assert issue.field == "context" and issue.file == str(path) and "input=context" in (issue.expected or "")
    # Required: each row says which mapped field it lacks, first.
    result = runner.invoke(app, ["data", "validate", str(path), "--map", "instruction=question,output=reply"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "qa.jsonl:1: reply: mapped field missing from the row" in result.stderr
    # A CSV header lacking a mapped column refuses the file once, at line 1.
    with pytest.raises(DataError) as refused:
        load_dataset(_sentences(tmp_path), column_map={"text": "sentence", "label": "cat"})
    assert refused.value.issues[0].line == 1 and refused.value.issues[0].field == "cat"


def test_issues_name_the_files_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answer": ""}])
    [issue] = validate_file(path, column_map={"instruction": "question", "output": "answer"}).issues
    assert issue.field == "answer (mapped to output)" and issue.line == 1


def test_another_mapping_of_the_same_file_is_another_version(tmp_path: Path) -> None:
    # Both columns hold the same text, so both mappings make the same rows: only the mapping differs.
    path = write_jsonl(tmp_path / "twins.jsonl", [{"body": "hello", "copy": "hello"}, {"body": "bye", "copy": "bye"}])
    registry = DatasetRegistry(tmp_path / "registry")
    first = registry.register(path, "twins", column_map={"text": "body"})
    again = registry.register(path, "twins", column_map={"text": "body"})
    other = registry.register(path, "twins", column_map={"text": "copy"})
    assert first.manifest.sha256 == other.manifest.sha256
    assert again.manifest.version == first.manifest.version == 1 and other.manifest.version == 2
    assert [v.manifest.notes.get("column_map") for v in registry.versions("twins")] == [{"text": "body"},
                                                                                        {"text": "copy"}]
    # The same through the CLI, with the label given as a label column.
    root = tmp_path / "cli"
    for extra in (["--map", "text=sentence,label=category"], ["--map", "text=sentence", "--label-column", "category"]):
        result = runner.invoke(app, ["data", "register", str(_sentences(tmp_path)), "--name", "r", "--root", str(root),
                                     *extra])  # fmt: skip
        assert result.exit_code == 0, result.output
    assert len(DatasetRegistry(root).versions("r")) == 1  # one rule: the two spellings are one mapping


def test_upload_ingestion_applies_and_records_the_mapping(tmp_path: Path) -> None:
    options = UploadOptions("qa.jsonl", 100, column_map={"instruction": "question", "output": "answer"})
    ingested = ingest_upload(_qa(tmp_path), tmp_path / "out.jsonl", options, scratch=tmp_path / "s")
    assert ingested.manifest["format"] == "alpaca"
    assert ingested.manifest["notes"]["column_map"] == {"instruction": "question", "output": "answer"}
    assert ingested.reports["validation"]["column_map"] == {"instruction": "question", "output": "answer"}
    missing = UploadOptions("qa.jsonl", 100, column_map={"instruction": "question", "output": "answer", "input": "x"})
    with pytest.raises(DataError) as refused:
        ingest_upload(_qa(tmp_path), tmp_path / "out2.jsonl", missing, scratch=tmp_path / "s2")
    assert refused.value.issues[0].file == "qa.jsonl" and refused.value.issues[0].field == "x"
