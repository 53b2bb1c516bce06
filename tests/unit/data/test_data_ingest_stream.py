"""Streaming ingestion of an upload: the in-memory path's verdicts, capped lists, nothing left on refusal."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from tunedeck.core.errors import DataError
from tunedeck.data.dedup import find_duplicates
from tunedeck.data.dedup_stream import StreamingDuplicateFinder
from tunedeck.data.ingest import MAX_REPORTED_ISSUES, TooManyRowsError, UploadOptions, ingest_upload
from tunedeck.data.loading import load_dataset


def _rows_with_duplicates(count: int, seed: int = 3) -> list[dict[str, str]]:
    """Rows of which about a fifth repeat an earlier text exactly and a third change its last two letters."""
    rng = random.Random(seed)
    bases = ["".join(rng.choices(string.ascii_lowercase + " ", k=60)) for _ in range(count // 10)]
    rows = []
    for _ in range(count):
        base, draw = rng.choice(bases), rng.random()
        fresh = "".join(rng.choices(string.ascii_lowercase, k=60))
        text = base if draw < 0.2 else base[:-2] + "zz" if draw < 0.5 else fresh
        rows.append({"prompt": text, "completion": "ok"})
    return rows


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _pair_keys(pairs: list[dict[str, object]]) -> set[tuple[object, ...]]:
    return {(p["match"], p["first"]["row"], p["second"]["row"], p["similarity"]) for p in pairs}  # type: ignore[index]


def test_the_streaming_finder_finds_every_pair_the_in_memory_one_finds(tmp_path: Path) -> None:
    path = _write(tmp_path / "rows.jsonl", _rows_with_duplicates(1500))
    expected = find_duplicates({"train": load_dataset(path)}).to_dict()
    finder = StreamingDuplicateFinder(tmp_path / "scratch")
    for line, row in enumerate(json.loads(text) for text in path.read_text().splitlines()):
        finder.add(row, line + 1)
    found = finder.report(max_pairs=100_000)
    assert expected["counts"]["exact_within"] > 100 and expected["counts"]["near_within"] > 10  # the data has both
    assert found["counts"] == expected["counts"]
    assert _pair_keys(found["pairs"]) == _pair_keys(expected["pairs"])


def test_the_listed_pairs_are_capped_and_in_row_order_while_counts_stay_whole(tmp_path: Path) -> None:
    finder = StreamingDuplicateFinder(tmp_path / "scratch")
    for line in range(1, 301):
        finder.add({"text": "the very same sentence"}, line)
    report = finder.report(max_pairs=5)
    assert report["counts"]["exact_within"] == 299 and report["counts"]["train_rows_to_drop"] == 299
    assert [(p["first"]["row"], p["second"]["row"]) for p in report["pairs"]] == [(1, r) for r in range(2, 7)]
    assert report["pairs_shown"] == 5


def test_a_file_past_the_row_limit_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path / "rows.jsonl", [{"text": f"row {i}"} for i in range(11)])
    out = tmp_path / "canonical.jsonl"
    with pytest.raises(TooManyRowsError, match="more than 10 rows"):
        ingest_upload(path, out, UploadOptions(display_name="mine.jsonl", max_rows=10), scratch=tmp_path / "s")
    assert not out.exists()


def test_invalid_rows_are_counted_whole_and_listed_up_to_the_cap(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = [{"text": f"row {i}"} for i in range(10)] + [{"text": 5}] * 150
    path = _write(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "canonical.jsonl"
    with pytest.raises(DataError) as refused:
        ingest_upload(path, out, UploadOptions(display_name="mine.jsonl", max_rows=1000), scratch=tmp_path / "s")
    assert len(refused.value.issues) == MAX_REPORTED_ISSUES and "150 issue(s)" in refused.value.title
    assert all(issue.file == "mine.jsonl" for issue in refused.value.issues)  # never the server's path
    assert not out.exists()

    options = UploadOptions(display_name="mine.jsonl", max_rows=1000, drop_invalid=True, preview_rows=3)
    kept = ingest_upload(path, out, options, scratch=tmp_path / "s2")
    validation = kept.reports["validation"]
    assert kept.rows == 10 and validation["rows_dropped"] == 150 and validation["rows_total"] == 160
    assert len(validation["issues"]) == MAX_REPORTED_ISSUES and len(validation["dropped_lines"]) == MAX_REPORTED_ISSUES
    assert len(kept.preview) == 3
    assert out.read_text().splitlines()[0] == '{"text":"row 0"}'
    assert kept.manifest["rows"] == 10 and kept.manifest["dropped"] == 150
