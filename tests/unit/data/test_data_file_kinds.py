"""Every common dataset file reads: text, TSV, gzip, shards; one-object JSON and lone surrogates are row errors."""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.data import CHAT_ROWS, PROMPT_COMPLETION_ROWS, TEXT_ROWS, write_jsonl
from tunedeck.cli.main import app
from tunedeck.core.errors import DataError
from tunedeck.data.loading import load_dataset
from tunedeck.data.validation import validate_file

runner = CliRunner()


def _gzip(path: Path) -> Path:
    packed = path.with_name(path.name + ".gz")
    with path.open("rb") as source, gzip.open(packed, "wb") as target:
        shutil.copyfileobj(source, target)
    return packed


def _issues(path: Path | str, **options: object) -> list[str]:
    with pytest.raises(DataError) as caught:
        load_dataset(path, **options)  # type: ignore[arg-type]
    return [issue.render() for issue in caught.value.issues]


# --- plain text -------------------------------------------------------------------------------


def test_text_file_is_one_document_per_line_and_blank_lines_are_none(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes("\ufefffirst line\r\n\n   \nsecond  line \nthird\n\n".encode())
    loaded = load_dataset(path)
    assert loaded.rows == [{"text": "first line"}, {"text": "second  line "}, {"text": "third"}]
    assert loaded.line_numbers == [1, 4, 5]
    assert loaded.source_format == "text"


def test_text_file_by_block_keeps_inner_line_breaks(tmp_path: Path) -> None:
    path = tmp_path / "essays.txt"
    path.write_text("\n\nOne paragraph\nover two lines.\n\n\n\nSecond.\n", encoding="utf-8")
    loaded = load_dataset(path, text_split="block")
    assert loaded.rows == [{"text": "One paragraph\nover two lines."}, {"text": "Second."}]
    assert loaded.line_numbers == [3, 8]


def test_text_file_bad_bytes_make_their_document_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nblock start\nbad \xff byte\n\nlast\n")
    assert _issues(path, text_split="block") == [
        f"{path}:3: bytes that are not UTF-8 (expected UTF-8 text, found byte 0xff at column 5)"
    ]
    loaded = load_dataset(path, text_split="block", drop_invalid=True)
    assert loaded.rows == [{"text": "last"}] and loaded.manifest.dropped == 1


def test_text_split_option_on_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "docs.txt"
    path.write_text("a\nb\n\nc\n", encoding="utf-8")
    lines = runner.invoke(app, ["data", "validate", str(path), "--json"])
    blocks = runner.invoke(app, ["data", "validate", str(path), "--text-split", "block", "--json"])
    assert json.loads(lines.stdout)["rows_valid"] == 3
    assert json.loads(blocks.stdout)["rows_valid"] == 2
    unknown = runner.invoke(app, ["data", "validate", str(path), "--text-split", "page"])
    assert unknown.exit_code == 1 and "unknown text split" in unknown.stderr
    assert "Traceback" not in unknown.output


# --- TSV ----------------------------------------------------------------------------------------


def test_tsv_reads_like_csv_with_tabs(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text(
        "prompt\tcompletion\nSay hi, politely\tHello, there\nOnly one cell\n\nWhy?\tBecause\n", encoding="utf-8"
    )
    assert _issues(path) == [
        f"{path}:3: wrong number of columns (expected 2 columns like the header, found 1 columns)"
    ]
    loaded = load_dataset(path, drop_invalid=True)
    assert loaded.rows[0] == {"prompt": "Say hi, politely", "completion": "Hello, there"}
    assert loaded.line_numbers == [2, 5]
    other = tmp_path / "pairs.dat"
    shutil.copy(path, other)
    assert load_dataset(other, file_type="tsv", drop_invalid=True).rows == loaded.rows


# --- gzip ---------------------------------------------------------------------------------------


def _plain_files(tmp_path: Path) -> list[Path]:
    jsonl = write_jsonl(tmp_path / "rows.jsonl", PROMPT_COMPLETION_ROWS)
    array = tmp_path / "rows.json"
    array.write_text(json.dumps(PROMPT_COMPLETION_ROWS, indent=2), encoding="utf-8")
    files = [jsonl, array]
    for name, delimiter in (("rows.csv", ","), ("rows.tsv", "\t")):
        with (tmp_path / name).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, delimiter=delimiter)
            writer.writerow(["prompt", "completion"])
            writer.writerows([r["prompt"], r["completion"]] for r in PROMPT_COMPLETION_ROWS)
        files.append(tmp_path / name)
    return files


def test_gzip_files_read_as_their_plain_twins(tmp_path: Path) -> None:
    for plain in _plain_files(tmp_path):
        expected = load_dataset(plain)
        packed = load_dataset(_gzip(plain))
        assert packed.rows == expected.rows, plain.name
        assert packed.line_numbers == expected.line_numbers, plain.name
        assert packed.manifest.sha256 == expected.manifest.sha256
    text = tmp_path / "lines.txt"
    text.write_text("".join(row["text"] + "\n" for row in TEXT_ROWS), encoding="utf-8")
    assert load_dataset(_gzip(text)).rows == TEXT_ROWS


def test_gzip_errors_keep_their_row_and_a_cut_file_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "ok"}\n{"text": 5}\n', encoding="utf-8")
    packed = _gzip(path)
    assert _issues(packed)[0].startswith(f"{packed}:2: text:")
    big = write_jsonl(tmp_path / "big.jsonl", [{"text": f"row number {i} " * 20} for i in range(3000)])
    cut = _gzip(big)
    cut.write_bytes(cut.read_bytes()[:4000])
    rendered = _issues(cut)
    assert len(rendered) == 1 and "unreadable gzip data" in rendered[0]
    parquet_gz = tmp_path / "rows.parquet.gz"
    parquet_gz.write_bytes(b"")
    assert "gzip-compressed Parquet" in _issues(parquet_gz)[0]


# --- shards -------------------------------------------------------------------------------------


def _shards(folder: Path) -> Path:
    folder.mkdir()
    write_jsonl(folder / "train-00001.jsonl", PROMPT_COMPLETION_ROWS[:2])
    write_jsonl(folder / "train-00000.jsonl", PROMPT_COMPLETION_ROWS[2:4])
    bad = [*PROMPT_COMPLETION_ROWS[4:], {"prompt": "no answer"}]
    write_jsonl(folder / "train-00002.jsonl", bad)
    return folder


def test_folder_and_pattern_of_shards_read_in_name_order(tmp_path: Path) -> None:
    folder = _shards(tmp_path / "shards")
    (folder / "_SUCCESS").write_text("", encoding="utf-8")
    (folder / ".train-00000.jsonl.crc").write_text("x", encoding="utf-8")
    for target in (folder, folder / "train-*.jsonl"):
        assert _issues(target) == [
            f"{folder / 'train-00002.jsonl'}:3: completion: missing field (expected a non-empty string, found nothing)"
        ]
        loaded = load_dataset(target, drop_invalid=True)
        order = PROMPT_COMPLETION_ROWS[2:4] + PROMPT_COMPLETION_ROWS[:2] + PROMPT_COMPLETION_ROWS[4:]
        assert [r["prompt"] for r in loaded.rows] == [r["prompt"] for r in order]
        assert loaded.line_numbers == [1, 2, 1, 2, 1, 2]
    only = load_dataset(folder / "train-0000[01].jsonl")
    assert len(only.rows) == 4
    result = runner.invoke(app, ["data", "validate", str(folder / "train-*.jsonl")])
    assert result.exit_code == 1 and "train-00002.jsonl:3: completion" in result.stderr


def test_shard_problems_are_refused_with_a_reason(tmp_path: Path) -> None:
    folder = _shards(tmp_path / "mixed")
    (folder / "notes.csv").write_text("text\nhello\n", encoding="utf-8")
    assert "shards of different file types" in _issues(folder)[0]
    assert "no shard files" in _issues(tmp_path / "mixed" / "eval-*.jsonl")[0]
    assert "folder not found" in _issues(tmp_path / "nowhere" / "*.jsonl")[0]
    outside = write_jsonl(tmp_path / "secret.jsonl", TEXT_ROWS)
    linked = tmp_path / "linked"
    linked.mkdir()
    write_jsonl(linked / "a.jsonl", TEXT_ROWS)
    os.symlink(outside, linked / "b.jsonl")
    assert "link leading out of its folder" in _issues(linked)[0]
    assert "link leading out of its folder" in _issues(linked / "*.jsonl")[0]


def test_an_existing_file_with_brackets_in_its_name_is_itself(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows[v2].jsonl", TEXT_ROWS)
    assert load_dataset(path).rows == TEXT_ROWS


# --- JSON: one object, row positions ------------------------------------------------------------


def test_one_json_object_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"version": 2, "data": TEXT_ROWS * 50}, indent=2), encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_dataset(path, drop_invalid=True)
    assert len(caught.value.issues) == 1
    assert "the file holds one JSON object, not a list of rows" in caught.value.issues[0].message
    assert "top-level array" in caught.value.issues[0].message
    report = validate_file(path)
    assert not report.ok and report.issue_count == 1


def test_json_file_of_lines_still_reads_and_a_bad_first_line_stays_a_row_error(tmp_path: Path) -> None:
    path = tmp_path / "lines.json"
    path.write_text("\n".join(json.dumps(r) for r in TEXT_ROWS) + "\n", encoding="utf-8")
    assert load_dataset(path).rows == TEXT_ROWS
    path.write_text('{"text": "cut\n' + "\n".join(json.dumps(r) for r in TEXT_ROWS), encoding="utf-8")
    rendered = _issues(path)
    assert len(rendered) == 1 and rendered[0].startswith(f"{path}:1: invalid JSON")


def test_json_array_rows_are_located_by_their_index(tmp_path: Path) -> None:
    path = tmp_path / "minified.json"
    rows: list[object] = [*PROMPT_COMPLETION_ROWS]
    rows[3] = {"prompt": "p", "completion": 7}
    path.write_text(json.dumps(rows), encoding="utf-8")
    rendered = _issues(path)
    assert len(rendered) == 1 and rendered[0].startswith(f"{path}:row 4: completion:")
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(PROMPT_COMPLETION_ROWS, indent=4), encoding="utf-8")
    assert load_dataset(pretty).line_numbers == [1, 2, 3, 4, 5, 6]
    as_json = runner.invoke(app, ["data", "validate", str(path), "--json"])
    issue = json.loads(as_json.stdout)["issues"][0]
    assert (issue["line"], issue["unit"]) == (4, "row")


# --- lone surrogates ----------------------------------------------------------------------------


def _surrogate_file(tmp_path: Path) -> Path:
    broken = json.loads(json.dumps(CHAT_ROWS[1]))
    broken["messages"][-1]["content"] = "PLACEHOLDER"
    lines = [json.dumps(CHAT_ROWS[0]), json.dumps(broken), json.dumps(CHAT_ROWS[2])]
    # The escape is written by hand: json.dumps would never produce half a pair.
    lines[1] = lines[1].replace("PLACEHOLDER", "half an emoji \\ud83d here")
    return write_jsonl_lines(tmp_path / "chat.jsonl", lines)


def write_jsonl_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_lone_surrogate_is_a_row_error_naming_the_field(tmp_path: Path) -> None:
    path = _surrogate_file(tmp_path)
    last = len(json.loads(path.read_text(encoding="utf-8").splitlines()[1])["messages"]) - 1
    with pytest.raises(DataError) as caught:
        load_dataset(path)
    (issue,) = caught.value.issues
    assert (issue.line, issue.field) == (2, f"messages[{last}].content")
    assert issue.message == "text with an unpaired surrogate"
    assert issue.expected is not None and issue.expected.startswith("valid Unicode text")
    kept = load_dataset(path, drop_invalid=True)  # hashing the kept rows must not trip over it
    assert len(kept.rows) == 2 and kept.manifest.dropped == 1
    array = tmp_path / "keys.json"
    array.write_text('[{"text": "fine \\ud83d\\ude00"}, {"text": "x", "\\udc00": 1}]', encoding="utf-8")
    rendered = _issues(array)
    assert rendered == [
        f"{array}:row 2: \udc00: text with an unpaired surrogate (expected valid Unicode text (a \\uD800-\\uDBFF "
        "escape is only valid followed by a \\uDC00-\\uDFFF one), found \\udc00 alone at character 1)"
    ]
    assert load_dataset(array, drop_invalid=True).rows == [{"text": "fine \U0001f600"}]


def test_validate_and_register_report_a_lone_surrogate_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "text.jsonl"
    write_jsonl_lines(path, ['{"text": "fine"}', '{"text": "broken \\ud83d"}', '{"text": "also fine"}'])
    result = runner.invoke(app, ["data", "validate", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert f"{path}:2: text: text with an unpaired surrogate" in result.stderr
    assert "Traceback" not in result.output
    as_json = runner.invoke(app, ["data", "validate", str(path), "--json"])
    report = json.loads(as_json.stdout)
    assert as_json.exit_code == 1 and report["issues"][0]["line"] == 2 and report["rows_valid"] == 2
    root = tmp_path / "registry"
    refused = runner.invoke(app, ["data", "register", str(path), "--name", "t", "--root", str(root)])
    assert refused.exit_code == 1 and "unpaired surrogate" in refused.stderr
    assert "Traceback" not in refused.output
    kept = runner.invoke(
        app, ["data", "register", str(path), "--name", "t", "--root", str(root), "--drop-invalid", "--json"]
    )
    assert kept.exit_code == 0 and json.loads(kept.stdout)["manifest"]["rows"] == 2
    for command in (["scan"], ["dedup"], ["split", "--out", str(tmp_path / "out")]):
        other = runner.invoke(app, ["data", command[0], str(path), *command[1:]])
        assert other.exit_code == 1 and "unpaired surrogate" in other.stderr, command
        assert not isinstance(other.exception, UnicodeError)


def test_registering_a_folder_of_shards_counts_rows_dropped_in_each(tmp_path: Path) -> None:
    from tunedeck.data.registry import DatasetRegistry

    folder = tmp_path / "parts"
    folder.mkdir()
    for name in ("a.jsonl", "b.jsonl"):  # the same line 2 is bad in both shards: two rows, not one
        write_jsonl(folder / name, [TEXT_ROWS[0], {"text": 3}, TEXT_ROWS[1]])
    version = DatasetRegistry(tmp_path / "registry").register(folder, "parts", drop_invalid=True)
    assert (version.manifest.rows, version.manifest.dropped) == (4, 2)
    assert load_dataset(folder, drop_invalid=True).manifest.dropped == 2
