"""Read dataset files one record at a time: JSONL, JSON array, CSV and Parquet.

Every reader streams, so memory stays bounded by the largest row, not the file:
JSONL and CSV line by line, JSON arrays element by element through an
incremental decoder, Parquet batch by batch. A record that cannot be read
(bad JSON, bytes that are not UTF-8, an oversize row) comes back as a record
with an issue and the reader moves on when it can; when the rest of the file
cannot be trusted (a broken JSON array) the issue is marked fatal and reading
stops.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tunedeck.core.dataset_vocabulary import FILE_TYPES
from tunedeck.core.errors import DataError, Issue

MAX_ROW_BYTES: Final[int] = 1_000_000
"""Largest accepted row, in UTF-8 bytes of its source text (1 MB).

That is roughly 250,000 tokens, beyond any context length we train at, so a
bigger row is almost surely a concatenation accident or an embedded blob; the
limit also keeps validation memory bounded by a known amount per row.
"""

MAX_JSON_DEPTH: Final[int] = 64
"""Deepest nesting of lists and objects accepted in one row; chat rows nest 3 or 4 levels."""

_EXTENSIONS: Final[dict[str, str]] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_CHUNK: Final[int] = 1 << 16
_PARQUET_BATCH: Final[int] = 1024

Progress = Callable[[int], None]
"""Called with the number of bytes read so far."""


@dataclass(frozen=True)
class SourceRecord:
    """One record as read from the file, before any format check.

    `line` is the 1-based line of the record's start (JSONL, JSON, CSV) or its
    1-based row number (Parquet). Exactly one of `value` and `issue` is set.
    """

    line: int
    value: Any = None
    issue: Issue | None = None
    tabular: bool = False
    fatal: bool = False


def detect_file_type(path: Path, override: str | None = None) -> str:
    """The file type from `override` or the extension; a DataError names the file otherwise."""
    if override is not None:
        if override not in FILE_TYPES:
            raise DataError(
                [
                    Issue(
                        "unknown file type",
                        file=str(path),
                        field="file_type",
                        expected="one of " + ", ".join(FILE_TYPES),
                        found=override,
                    )
                ]
            )
        return override
    file_type = _EXTENSIONS.get(path.suffix.lower())
    if file_type is None:
        raise DataError(
            [
                Issue(
                    "cannot tell the file type from the extension",
                    file=str(path),
                    expected="one of " + ", ".join(sorted(_EXTENSIONS)),
                    found=path.suffix or "no extension",
                )
            ]
        )
    return file_type


def iter_records(
    path: Path, file_type: str, *, max_row_bytes: int = MAX_ROW_BYTES, on_progress: Progress | None = None
) -> Iterator[SourceRecord]:
    """Yield the records of `path` read as `file_type`, with progress in bytes."""
    if not path.is_file():
        raise DataError([Issue("file not found", file=str(path), expected="an existing file")])
    if file_type == "json" and _first_significant_byte(path) != b"[":
        file_type = "jsonl"  # a `.json` file of one object per line is JSONL in all but name
    readers = {"jsonl": _iter_jsonl, "json": _iter_json_array, "csv": _iter_csv, "parquet": _iter_parquet}
    yield from readers[file_type](path, max_row_bytes, on_progress or (lambda _done: None))


def _first_significant_byte(path: Path) -> bytes:
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            stripped = chunk.lstrip(b" \t\r\n\xef\xbb\xbf")
            if stripped:
                return stripped[:1]
    return b""


def _oversize(line: int, size: int, limit: int) -> SourceRecord:
    return SourceRecord(
        line, issue=Issue("row too large", expected=f"at most {limit} bytes", found=f"{size} bytes")
    )


def _not_utf8(line: int, error: UnicodeDecodeError) -> SourceRecord:
    return SourceRecord(
        line,
        issue=Issue(
            "bytes that are not UTF-8",
            expected="UTF-8 text",
            found=f"byte 0x{error.object[error.start]:02x} at column {error.start + 1}",
        ),
    )


def json_depth(value: Any) -> int:
    """How deeply `value`'s lists and objects nest (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _depth_issue(depth: str) -> Issue:
    return Issue("JSON nested too deeply", expected=f"at most {MAX_JSON_DEPTH} levels of [ and {{", found=depth)


def _too_deep(value: Any, text: str) -> Issue | None:
    """An issue when `value` nests deeper than MAX_JSON_DEPTH (only rows with that many brackets are walked)."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return None
    depth = json_depth(value)
    return _depth_issue(f"{depth} levels") if depth > MAX_JSON_DEPTH else None


def _unparsable_number(error: ValueError) -> Issue:
    return Issue("number too long", expected="numbers of at most 4300 digits", found=str(error).split(":")[0])


def _iter_jsonl(path: Path, limit: int, progress: Progress) -> Iterator[SourceRecord]:
    done = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            done += len(raw)
            if number % 4096 == 0:
                progress(done)
            if len(raw) > limit:
                yield _oversize(number, len(raw), limit)
                continue
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                yield _not_utf8(number, error)
                continue
            if not text.strip():
                continue  # blank lines (a trailing newline, spacing) carry no row
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                yield SourceRecord(
                    number,
                    issue=Issue(
                        "invalid JSON",
                        expected="one JSON object per line",
                        found=f"{error.msg} at column {error.colno}",
                    ),
                )
                continue
            except RecursionError:
                yield SourceRecord(number, issue=_depth_issue("more levels than the parser can follow"))
                continue
            except ValueError as error:  # an integer with more digits than Python converts
                yield SourceRecord(number, issue=_unparsable_number(error))
                continue
            too_deep = _too_deep(value, text)
            yield SourceRecord(number, issue=too_deep) if too_deep else SourceRecord(number, value=value)
    progress(done)


def _iter_json_array(path: Path, limit: int, progress: Progress) -> Iterator[SourceRecord]:
    """Decode `[elem, elem, ...]` one element at a time from a growing text buffer."""
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8-sig")()
    buffer, position, line, done, eof, started = "", 0, 1, 0, False, False
    with path.open("rb") as handle:
        while True:
            # Skip whitespace, the opening bracket and separators, counting lines as we go.
            while position < len(buffer) and buffer[position] in " \t\r\n,[":
                if buffer[position] == "[":
                    if started:
                        break
                    started = True
                line += buffer[position] == "\n"
                position += 1
            if position < len(buffer) and buffer[position] == "]":
                return
            if position < len(buffer):
                try:
                    value, end = decoder.raw_decode(buffer, position)
                except json.JSONDecodeError as error:
                    if not eof and len(buffer) - position <= limit:
                        value, end = None, -1  # maybe the element is cut by the chunk edge: read more
                    else:
                        yield SourceRecord(
                            line + buffer.count("\n", position, error.pos),
                            fatal=True,
                            issue=Issue(
                                "invalid JSON",
                                expected="a JSON array of objects",
                                found=f"{error.msg}; the rest of the file is unreadable",
                            ),
                        )
                        return
                except (RecursionError, ValueError) as error:
                    # The element's end is unknown, so nothing after it can be read either.
                    issue = (
                        _depth_issue("more levels than the parser can follow")
                        if isinstance(error, RecursionError)
                        else _unparsable_number(error)
                    )
                    yield SourceRecord(line, fatal=True, issue=issue)
                    return
                if end >= 0:
                    too_deep = None if end - position > limit else _too_deep(value, buffer[position:end])
                    if end - position > limit:
                        yield _oversize(line, end - position, limit)
                    elif too_deep is not None:
                        yield SourceRecord(line, issue=too_deep)
                    else:
                        yield SourceRecord(line, value=value)
                    line += buffer.count("\n", position, end)
                    buffer, position = buffer[end:], 0
                    continue
            if eof:
                yield SourceRecord(
                    line,
                    fatal=True,
                    issue=Issue("invalid JSON", expected="a JSON array closed by ]", found="end of file"),
                )
                return
            chunk = handle.read(_CHUNK)
            done += len(chunk)
            progress(done)
            eof = not chunk
            try:
                buffer = buffer[position:] + utf8.decode(chunk, final=eof)
            except UnicodeDecodeError as error:
                yield SourceRecord(
                    line + buffer.count("\n", position),
                    fatal=True,
                    issue=Issue(
                        "bytes that are not UTF-8",
                        expected="UTF-8 text",
                        found=f"byte 0x{error.object[error.start]:02x}; the rest of the file is unreadable",
                    ),
                )
                return
            position = 0


def _iter_csv(path: Path, limit: int, progress: Progress) -> Iterator[SourceRecord]:
    bad_lines: dict[int, UnicodeDecodeError] = {}
    done = 0

    def lines() -> Iterator[str]:
        nonlocal done
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                done += len(raw)
                try:
                    yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as error:
                    bad_lines[number] = error
                    yield raw.decode("utf-8", errors="replace")

    # The module-wide cell limit (128 KiB by default) would reject rows our own limit accepts.
    csv.field_size_limit(max(limit, 131072))
    reader = csv.reader(lines())
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as error:
        yield SourceRecord(
            1, fatal=True, issue=Issue("unreadable CSV header", expected="a header row", found=str(error))
        )
        return
    last_line = reader.line_num
    while True:
        first_line = last_line + 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            yield SourceRecord(
                reader.line_num,
                fatal=True,
                issue=Issue("unreadable CSV row", expected="valid CSV", found=str(error)),
            )
            return
        last_line = reader.line_num
        if first_line % 4096 == 0:
            progress(done)
        broken = [n for n in range(first_line, last_line + 1) if n in bad_lines]
        if broken:
            yield _not_utf8(broken[0], bad_lines.pop(broken[0]))
            continue
        if not any(cell.strip() for cell in cells):
            continue
        size = sum(len(cell.encode("utf-8")) for cell in cells)
        if size > limit:
            yield _oversize(first_line, size, limit)
        elif len(cells) != len(header):
            yield SourceRecord(
                first_line,
                issue=Issue(
                    "wrong number of columns",
                    expected=f"{len(header)} columns like the header",
                    found=f"{len(cells)} columns",
                ),
            )
        else:
            yield SourceRecord(first_line, value=dict(zip(header, cells, strict=True)), tabular=True)
    progress(done)


def _iter_parquet(path: Path, limit: int, progress: Progress) -> Iterator[SourceRecord]:
    import pyarrow.parquet as pq  # imported here: pyarrow is heavy and only Parquet needs it

    try:
        parquet = pq.ParquetFile(path)
    except Exception as error:  # pyarrow raises several unrelated types for a bad file
        raise DataError(
            [Issue("unreadable Parquet file", file=str(path), expected="a Parquet file", found=str(error))]
        ) from error
    number = 0
    size = path.stat().st_size
    total = max(parquet.metadata.num_rows, 1)
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH):
        for value in batch.to_pylist():
            number += 1
            encoded = len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))
            yield _oversize(number, encoded, limit) if encoded > limit else SourceRecord(number, value=value)
        progress(size * number // total)
