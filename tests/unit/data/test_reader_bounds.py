"""Readers hold a bounded amount whatever the file: an over-long line is measured, not loaded; a gzip bomb stops."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tunedeck.core.errors import DataError
from tunedeck.data import readers
from tunedeck.data.readers import MAX_GZIP_RATIO, MIN_GZIP_ALLOWANCE, iter_records

ROW = json.dumps({"prompt": "2+2?", "completion": "4"}) + "\n"


_READ_AND_MEASURE = """
import json, re, sys
from pathlib import Path
from tunedeck.data.readers import iter_records
records = list(iter_records(Path(sys.argv[1]), sys.argv[2]))
# VmHWM: this program's own peak (getrusage's figure can keep the parent's peak across the exec).
peak_mb = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) / 1024
print(json.dumps({"lines": [r.line for r in records], "found": [r.issue.found if r.issue else None for r in records],
                  "peak_mb": peak_mb}))
"""


def test_a_line_far_over_the_row_limit_is_refused_with_its_size_without_being_held(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    long_line = 300 * 1024 * 1024  # 300 MiB of one line
    with path.open("wb") as sink:
        sink.write(ROW.encode())
        chunk = b"x" * (1024 * 1024)
        for _ in range(long_line // len(chunk)):
            sink.write(chunk)
        sink.write(b"\n" + ROW.encode())
    seen = _read_in_a_process(path, "jsonl")
    assert seen["lines"] == [1, 2, 3] and seen["found"] == [None, f"{long_line + 1} bytes", None]
    assert seen["peak_mb"] < 250, f"reading peaked at {seen['peak_mb']:.0f} MB for a 300 MB line"


def _read_in_a_process(path: Path, file_type: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _READ_AND_MEASURE, str(path), file_type], capture_output=True, text=True
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def _file_with_a_long_line(path: Path, first: str, last: str, long_line: int) -> None:
    with path.open("wb") as sink:
        sink.write(first.encode())
        chunk = b"y" * (1024 * 1024)
        for _ in range(long_line // len(chunk)):
            sink.write(chunk)
        sink.write(b"\n" + last.encode())


@pytest.mark.parametrize("file_type", ["csv", "text"])
def test_a_csv_or_text_line_far_over_the_row_limit_is_refused_without_being_held(
    tmp_path: Path, file_type: str
) -> None:
    path = tmp_path / f"rows.{file_type}"
    long_line = 300 * 1024 * 1024
    if file_type == "csv":
        _file_with_a_long_line(path, "text,label\nfirst,a\n", "last,b\n", long_line)
        expected_lines = [2, 3, 4]  # the header is line 1
    else:
        _file_with_a_long_line(path, "first\n", "last\n", long_line)
        expected_lines = [1, 2, 3]
    seen = _read_in_a_process(path, file_type)
    assert seen["lines"] == expected_lines and seen["found"] == [None, f"{long_line + 1} bytes", None]
    assert seen["peak_mb"] < 250, f"reading peaked at {seen['peak_mb']:.0f} MB for a 300 MB line"


def test_a_parquet_row_group_over_the_bound_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rows.parquet"
    table = pa.table({"text": [f"row {n} " * 20 for n in range(2000)], "label": ["a"] * 2000})
    pq.write_table(table, path, row_group_size=500)
    sizes = [pq.ParquetFile(path).metadata.row_group(i).total_byte_size for i in range(4)]
    monkeypatch.setattr(readers, "MAX_PARQUET_ROW_GROUP_BYTES", max(sizes))
    assert len(list(iter_records(path, "parquet"))) == 2000  # every group within the bound reads
    pq.write_table(table, path, row_group_size=2000)
    with pytest.raises(DataError) as refused:
        next(iter(iter_records(path, "parquet")))
    issue = refused.value.issues[0]
    assert issue.message == "Parquet row group 0 is too large to read"
    assert f"at most {max(sizes)} bytes" in (issue.expected or "") and "2000 rows" in (issue.found or "")


def test_gzip_data_that_expands_past_its_allowance_stops_with_a_fatal_issue(tmp_path: Path) -> None:
    path = tmp_path / "bomb.jsonl.gz"
    rows = ROW.encode() * 1000
    target = MIN_GZIP_ALLOWANCE + 8 * 1024 * 1024
    with gzip.open(path, "wb", compresslevel=9) as sink:
        for _ in range(target // len(rows) + 1):
            sink.write(rows)
    assert path.stat().st_size * MAX_GZIP_RATIO < MIN_GZIP_ALLOWANCE  # so the allowance is the floor here
    records = list(iter_records(path, "jsonl"))
    last = records[-1]
    assert last.fatal and last.issue is not None and last.issue.message == "gzip data expands too much"
    assert "upload the file uncompressed or split it" in (last.issue.found or "")
    assert all(record.value for record in records[:-1]) and len(records) > 1000


def test_ordinary_gzip_files_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl.gz"
    with gzip.open(path, "wt") as sink:
        sink.write(ROW * 500)
    assert [record.value["completion"] for record in iter_records(path, "jsonl")] == ["4"] * 500
