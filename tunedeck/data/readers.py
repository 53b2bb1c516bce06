"""Read dataset files one record at a time: JSONL, JSON array, CSV, TSV, plain text and Parquet.

Every reader streams, so memory stays bounded by the largest row, not the file:
JSONL, CSV, TSV and text line by line, JSON arrays element by element through an
incremental decoder, Parquet batch by batch. A `.gz` file is decompressed on the
fly, and a folder or a glob pattern of shards reads as one dataset in name order,
each record remembering the shard it came from. A record that cannot be read
(bad JSON, bytes that are not UTF-8, an oversize row) comes back as a record
with an issue and the reader moves on when it can; when the rest of the file
cannot be trusted (a broken JSON array) the issue is marked fatal and reading
stops.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import re
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Final, cast

from tunedeck.core.dataset_vocabulary import COMPRESSED_SUFFIX, FILE_EXTENSIONS, FILE_TYPES
from tunedeck.core.errors import DataError, Issue

MAX_ROW_BYTES: Final[int] = 1_000_000
"""Largest accepted row, in UTF-8 bytes of its source text (1 MB).

That is roughly 250,000 tokens, beyond any context length we train at, so a
bigger row is almost surely a concatenation accident or an embedded blob; the
limit also keeps validation memory bounded by a known amount per row.
"""

MAX_GZIP_RATIO: Final[int] = 100
"""How many times its own size a gzip file may expand to (past MIN_GZIP_ALLOWANCE): text datasets compress
5 to 20 times; a file that expands more is refused before it fills memory or disk."""

MIN_GZIP_ALLOWANCE: Final[int] = 64 * 1024 * 1024
"""Bytes any gzip file may expand to, whatever its ratio (a tiny file of repeated rows is no bomb)."""

MAX_PARQUET_ROW_GROUP_BYTES: Final[int] = 1024 * 1024 * 1024
"""Largest Parquet row group accepted, uncompressed, as the file's footer declares it (1 GiB): a row group is
the unit a Parquet reader decodes, so a bigger one would be held whole before any row could be checked."""

MAX_JSON_DEPTH: Final[int] = 64
"""Deepest nesting of lists and objects accepted in one row; chat rows nest 3 or 4 levels."""

_EXTENSIONS: Final[dict[str, str]] = FILE_EXTENSIONS
_COMPRESSED: Final[str] = COMPRESSED_SUFFIX
TEXT_SPLITS: Final[tuple[str, ...]] = ("line", "block")
"""How a plain-text file divides into documents: one per line, or one per blank-line-separated block."""
_PATTERN_CHARS: Final[str] = "*?["
# Only text read from JSON can hold a lone surrogate (UTF-8 bytes cannot encode one), and only
# through a `\uD800`-`\uDFFF` escape: rows without such an escape are never walked.
_SURROGATE_ESCAPE: Final[re.Pattern[str]] = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE: Final[re.Pattern[str]] = re.compile(r"[\ud800-\udfff]")
_CHUNK: Final[int] = 1 << 16
_PARQUET_BATCH: Final[int] = 1024

Progress = Callable[[int], None]
"""Called with the number of bytes read so far."""


@dataclass(frozen=True)
class SourceRecord:
    """One record as read from the file, before any format check.

    `line` is the 1-based line of the record's start (JSONL, CSV, TSV, text) or
    its 1-based row number (JSON array, Parquet; `unit` is then "row"). `source`
    names the shard file when the dataset is a folder or pattern of shards.
    Exactly one of `value` and `issue` is set.
    """

    line: int
    value: Any = None
    issue: Issue | None = None
    tabular: bool = False
    fatal: bool = False
    source: str | None = None
    unit: str | None = None


def is_compressed(path: Path) -> bool:
    """True for a gzip file, told by its `.gz` extension."""
    return path.suffix.lower() == _COMPRESSED


def _extension(path: Path) -> str:
    """The extension that names the file type: `.jsonl` for both `a.jsonl` and `a.jsonl.gz`."""
    return Path(path.stem).suffix.lower() if is_compressed(path) else path.suffix.lower()


def is_sharded(path: Path) -> bool:
    """True when `path` names several files: a folder, or a glob pattern in its last part.

    An existing file is always just itself, whatever brackets its name holds.
    """
    if path.is_dir():
        return True
    return not path.exists() and any(char in path.name for char in _PATTERN_CHARS)


def dataset_files(path: Path) -> list[Path]:
    """The files `path` names, in the order they are read: itself, or a folder's or pattern's shards by name.

    A folder's hidden and `_`-prefixed entries (`.crc`, `_SUCCESS` markers of
    data tools) are not data. Patterns apply to the file name only, and a
    shard that is a link leading out of its folder is refused: a folder or
    pattern reads no more than the folder it names.
    """
    if not is_sharded(path):
        if not path.is_file():
            raise DataError([Issue("file not found", file=str(path), expected="an existing dataset file")])
        return [path]
    folder = path if path.is_dir() else path.parent
    if not folder.is_dir():
        raise DataError(
            [
                Issue(
                    "folder not found",
                    file=str(folder),
                    expected="an existing folder (a pattern applies to file names only, like data/train-*.jsonl)",
                )
            ]
        )
    if path.is_dir():
        candidates = [p for p in folder.iterdir() if not p.name.startswith((".", "_"))]
    else:
        try:
            candidates = list(folder.glob(path.name))
        except ValueError as error:  # "**" mixed into a name, which pathlib refuses
            raise DataError(
                [Issue("invalid file pattern", file=str(path), expected="a glob pattern like train-*.jsonl",
                       found=str(error))]
            ) from None
    shards = sorted((p for p in candidates if p.is_file()), key=lambda p: p.name)
    root = folder.resolve()
    leaving = [p.name for p in shards if not p.resolve().is_relative_to(root)]
    if leaving:
        raise DataError(
            [
                Issue(
                    "shard is a link leading out of its folder",
                    file=str(folder / name),
                    expected=f"files inside {folder}",
                    found="a link to " + str((folder / name).resolve()),
                )
                for name in leaving
            ]
        )
    if not shards:
        raise DataError(
            [Issue("no shard files", file=str(path), expected="at least one dataset file", found="none")]
        )
    return shards


def detect_file_type(path: Path, override: str | None = None) -> str:
    """The file type from `override` or the extension; a DataError names the file otherwise.

    For a folder or pattern of shards every shard must have the same type.
    """
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
    if is_sharded(path):
        types = {shard: detect_file_type(shard) for shard in dataset_files(path)}
        first = next(iter(types.values()))
        odd = [shard for shard, kind in types.items() if kind != first]
        if odd:
            raise DataError(
                [
                    Issue(
                        "shards of different file types",
                        file=str(shard),
                        expected=f"{first} like the first shard",
                        found=types[shard],
                    )
                    for shard in odd
                ]
            )
        return first
    file_type = _EXTENSIONS.get(_extension(path))
    if file_type is None:
        known = sorted(_EXTENSIONS)
        raise DataError(
            [
                Issue(
                    "cannot tell the file type from the extension",
                    file=str(path),
                    expected="one of " + ", ".join(known) + " (each may end in .gz)",
                    found=path.suffix or "no extension",
                )
            ]
        )
    return file_type


def iter_records(
    path: Path,
    file_type: str,
    *,
    max_row_bytes: int = MAX_ROW_BYTES,
    on_progress: Progress | None = None,
    text_split: str = "line",
) -> Iterator[SourceRecord]:
    """Yield the records of `path` read as `file_type`, with progress in bytes.

    `path` may be a folder or a glob pattern of shards: they are read in name
    order as one dataset, each record's `source` naming its shard. `text_split`
    chooses how a plain-text file divides into documents (see TEXT_SPLITS).
    """
    if text_split not in TEXT_SPLITS:
        raise DataError(
            [
                Issue(
                    "unknown text split",
                    field="text_split",
                    expected="one of " + ", ".join(TEXT_SPLITS),
                    found=text_split,
                )
            ]
        )
    shards = dataset_files(path)
    report = on_progress or (lambda _done: None)
    offset = 0
    for shard in shards:
        source = str(shard) if is_sharded(path) else None
        records = _iter_file(shard, file_type, max_row_bytes, _shifted(report, offset), text_split)
        for record in records:
            yield replace(record, source=source) if source is not None else record
            if record.fatal:
                return
        offset += shard.stat().st_size


def _shifted(progress: Progress, base: int) -> Progress:
    """Progress through one shard as progress through the whole dataset, `base` bytes further on."""
    return lambda done: progress(base + done)


def _iter_file(
    path: Path, file_type: str, limit: int, progress: Progress, text_split: str
) -> Iterator[SourceRecord]:
    """One file's records; a gzip stream that breaks off is one fatal issue, not a traceback."""
    if file_type == "parquet" and is_compressed(path):
        raise DataError(
            [
                Issue(
                    "a gzip-compressed Parquet file cannot be read",
                    file=str(path),
                    expected="the .parquet file itself (Parquet compresses its own columns)",
                    found="a .gz file",
                )
            ]
        )
    if file_type == "json":
        shape = _json_shape(path)
        if shape == "object":
            yield SourceRecord(1, fatal=True, issue=_one_object_issue())
            return
        if shape != "array":
            file_type = "jsonl"  # a `.json` file of one object per line is JSONL in all but name
    readers: dict[str, Callable[[Path, int, Progress], Iterator[SourceRecord]]] = {
        "jsonl": _iter_jsonl,
        "json": _iter_json_array,
        "csv": _iter_csv,
        "tsv": lambda p, n, pr: _iter_csv(p, n, pr, delimiter="\t"),
        "text": lambda p, n, pr: _iter_text(p, n, pr, block=text_split == "block"),
        "parquet": _iter_parquet,
    }
    last = 0
    try:
        for record in readers[file_type](path, limit, progress):
            last = record.line
            yield record
    except GzipExpansionError as error:
        yield SourceRecord(
            last + 1,
            fatal=True,
            issue=Issue(
                "gzip data expands too much",
                expected=f"at most {MAX_GZIP_RATIO} times the compressed file's size (or {MIN_GZIP_ALLOWANCE} bytes)",
                found=f"more than {error.args[0]} bytes after record {last}; upload the file uncompressed or split it",
            ),
        )
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        yield SourceRecord(
            last + 1,
            fatal=True,
            issue=Issue(
                "unreadable gzip data",
                expected="a complete gzip file",
                found=f"{error or type(error).__name__} after record {last}; the rest of the file is unreadable",
            ),
        )


@contextmanager
def _open_bytes(path: Path) -> Iterator[tuple[IO[bytes], Callable[[], int]]]:
    """The file's bytes, decompressed when it is gzip, and how many of the file's own bytes are read."""
    with path.open("rb") as raw:
        if is_compressed(path):
            allowance = max(MIN_GZIP_ALLOWANCE, MAX_GZIP_RATIO * path.stat().st_size)
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield cast(IO[bytes], _ExpansionLimit(cast(IO[bytes], unzipped), allowance)), raw.tell
        else:
            yield raw, raw.tell


class GzipExpansionError(ValueError):
    """A gzip file decompressed past its allowance (see MAX_GZIP_RATIO)."""


class _ExpansionLimit(io.RawIOBase):
    """A decompressed stream that raises GzipExpansionError once more than `allowance` bytes came out of it."""

    def __init__(self, source: IO[bytes], allowance: int) -> None:
        self.source, self.allowance, self.given = source, allowance, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:  # type: ignore[override]
        data = self.source.read(len(buffer))
        self.given += len(data)
        if self.given > self.allowance:
            raise GzipExpansionError(self.allowance)
        buffer[: len(data)] = data
        return len(data)

    def readline(self, size: int | None = -1) -> bytes:
        line = self.source.readline(-1 if size is None else size)
        self.given += len(line)
        if self.given > self.allowance:
            raise GzipExpansionError(self.allowance)
        return line


def _one_object_issue() -> Issue:
    return Issue(
        "the file holds one JSON object, not a list of rows: put the rows in a top-level array, "
        "or use JSON Lines",
        expected="a JSON array of row objects, or one JSON object per line",
        found="one JSON object spread over several lines",
    )


def _json_shape(path: Path) -> str:
    """What a `.json` file holds: "array", "object" (one object over several lines) or "lines" (JSON Lines).

    A JSON Lines row sits on one line, so a first line that is not JSON on its
    own, followed by another that is not either, is the start of one big
    object; a first line that is broken but followed by good rows is a JSONL
    file with a bad row, reported as such.
    """
    with _open_bytes(path) as (handle, _position):
        first: bytes | None = None
        for raw in _bounded_lines(handle, MAX_ROW_BYTES):
            stripped = raw.strip(b" \t\r\n\xef\xbb\xbf")
            if not stripped:
                continue
            if first is None:
                if stripped[:1] == b"[":
                    return "array"
                if stripped[:1] != b"{" or _parses(stripped):
                    return "lines"
                first = stripped
                continue
            return "lines" if _parses(stripped) else "object"
    return "lines" if first is None else "object"


def _lines_within(handle: IO[bytes], limit: int) -> Iterator[tuple[bytes, int]]:
    """Each line and its size; a line over `limit` bytes comes back empty, with its size, never held whole."""
    while raw := handle.readline(limit + 1):
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw, len(raw)
            continue
        size = len(raw)
        while not raw.endswith(b"\n"):  # the rest of the over-long line, a chunk at a time
            raw = handle.readline(_CHUNK)
            if not raw:
                break
            size += len(raw)
        yield b"", size


def _bounded_lines(handle: IO[bytes], limit: int) -> Iterator[bytes]:
    """The file's lines, each cut to `limit` bytes: a minified array on one line is never held whole."""
    while raw := handle.readline(limit):
        yield raw
        while not raw.endswith(b"\n") and len(raw) == limit:  # skip the rest of a cut line
            raw = handle.readline(limit)


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return False
    return True


def _surrogate_issue(value: Any, text: str) -> Issue | None:
    """An issue naming the first field whose text holds an unpaired surrogate (JSON `"\\ud83d"` alone).

    Such text cannot be encoded as UTF-8, so hashing, deduplication, scanning and
    tokenizing would all fail on it: it stops here, as a row error.
    """
    if not _SURROGATE_ESCAPE.search(text):
        return None
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return Issue(
                    "text with an unpaired surrogate",
                    field=where or None,
                    expected="valid Unicode text (a \\uD800-\\uDBFF escape is only valid followed by a "
                    "\\uDC00-\\uDFFF one)",
                    found=f"\\u{ord(found.group()):04x} alone at character {found.start() + 1}",
                )
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                path = f"{where}.{key}" if where else str(key)
                if _SURROGATE.search(key):
                    stack.append((key, path))
                stack.append((child, path))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{index}]") for index, child in reversed(list(enumerate(item))))
    return None


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
    with _open_bytes(path) as (handle, position):
        for number, (raw, size) in enumerate(_lines_within(handle, limit), start=1):
            if number % 4096 == 0:
                progress(position())
            if size > limit:
                yield _oversize(number, size, limit)
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
            issue = _too_deep(value, text) or _surrogate_issue(value, text)
            yield SourceRecord(number, issue=issue) if issue else SourceRecord(number, value=value)
        progress(position())


def _iter_json_array(path: Path, limit: int, progress: Progress) -> Iterator[SourceRecord]:
    """Decode `[elem, elem, ...]` one element at a time from a growing text buffer.

    Each element is located by its 1-based index in the array (`row 3`), which
    stays meaningful when the whole array sits on one line; a problem that
    breaks the array is located by its line, where an editor finds it.
    """
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8-sig")()
    buffer, position, line, eof, started, row = "", 0, 1, False, False, 0
    with _open_bytes(path) as (handle, read_so_far):
        while True:
            position, line, started = _skip_separators(buffer, position, line, started)
            if position < len(buffer) and buffer[position] == "]":
                return
            if position < len(buffer):
                decoded = _decode_element(decoder, buffer, position, line, eof=eof, limit=limit)
                if isinstance(decoded, SourceRecord):
                    yield decoded
                    return
                value, end = decoded
                if end >= 0:
                    row += 1
                    yield _element_record(value, buffer, position, end, row, limit)
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
            progress(read_so_far())
            eof = not chunk
            try:
                buffer = buffer[position:] + utf8.decode(chunk, final=eof)
            except UnicodeDecodeError as error:
                yield _not_utf8_to_the_end(line + buffer.count("\n", position), error)
                return
            position = 0


def _skip_separators(buffer: str, position: int, line: int, started: bool) -> tuple[int, int, bool]:
    """Skip whitespace, the opening bracket and separators, counting lines as we go; returns the new
    position and line, and whether the array's bracket was seen (a second one stops the skip)."""
    while position < len(buffer) and buffer[position] in " \t\r\n,[":
        if buffer[position] == "[":
            if started:
                break
            started = True
        line += buffer[position] == "\n"
        position += 1
    return position, line, started


def _decode_element(
    decoder: json.JSONDecoder, buffer: str, position: int, line: int, *, eof: bool, limit: int
) -> tuple[Any, int] | SourceRecord:
    """The array element at `position` and where it ends (end -1 when it may be cut by the chunk edge:
    read more), or the fatal record when it cannot be decoded."""
    try:
        return decoder.raw_decode(buffer, position)
    except json.JSONDecodeError as error:
        if not eof and len(buffer) - position <= limit:
            return None, -1  # maybe the element is cut by the chunk edge: read more
        return SourceRecord(
            line + buffer.count("\n", position, error.pos),
            fatal=True,
            issue=Issue(
                "invalid JSON",
                expected="a JSON array of objects",
                found=f"{error.msg}; the rest of the file is unreadable",
            ),
        )
    except (RecursionError, ValueError) as error:
        # The element's end is unknown, so nothing after it can be read either.
        issue = (
            _depth_issue("more levels than the parser can follow")
            if isinstance(error, RecursionError)
            else _unparsable_number(error)
        )
        return SourceRecord(line, fatal=True, issue=issue)


def _element_record(value: Any, buffer: str, position: int, end: int, row: int, limit: int) -> SourceRecord:
    """The record of the decoded element `buffer[position:end]`, the array's `row`-th: its value, or why not."""
    if end - position > limit:
        return replace(_oversize(row, end - position, limit), unit="row")
    text = buffer[position:end]
    problem = _too_deep(value, text) or _surrogate_issue(value, text)
    return SourceRecord(row, issue=problem, unit="row") if problem else SourceRecord(row, value=value, unit="row")


def _not_utf8_to_the_end(line: int, error: UnicodeDecodeError) -> SourceRecord:
    """The fatal record of bytes that do not decode as UTF-8 (nothing after them can be read)."""
    return SourceRecord(
        line,
        fatal=True,
        issue=Issue(
            "bytes that are not UTF-8",
            expected="UTF-8 text",
            found=f"byte 0x{error.object[error.start]:02x}; the rest of the file is unreadable",
        ),
    )


def _iter_csv(path: Path, limit: int, progress: Progress, delimiter: str = ",") -> Iterator[SourceRecord]:
    """CSV rows (or TSV ones, with a tab `delimiter`) as header-keyed records located by their first line."""
    bad_lines: dict[int, UnicodeDecodeError] = {}
    long_lines: dict[int, int] = {}  # physical lines over the row limit, never held: their sizes
    done = 0

    def lines() -> Iterator[str]:
        nonlocal done
        with _open_bytes(path) as (handle, position):
            for number, (raw, size) in enumerate(_lines_within(handle, limit), start=1):
                done = position()
                if size > limit:
                    long_lines[number] = size
                    yield "\n"  # in its place, so the rows after it keep their line numbers
                    continue
                try:
                    yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as error:
                    bad_lines[number] = error
                    yield raw.decode("utf-8", errors="replace")

    # The module-wide cell limit (128 KiB by default) would reject rows our own limit accepts.
    csv.field_size_limit(max(limit, 131072))
    reader = csv.reader(lines(), delimiter=delimiter)
    name = "TSV" if delimiter == "\t" else "CSV"
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as error:
        yield SourceRecord(
            1, fatal=True, issue=Issue(f"unreadable {name} header", expected="a header row", found=str(error))
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
                issue=Issue(f"unreadable {name} row", expected=f"valid {name}", found=str(error)),
            )
            return
        last_line = reader.line_num
        if first_line % 4096 == 0:
            progress(done)
        broken = [n for n in range(first_line, last_line + 1) if n in bad_lines]
        if broken:
            yield _not_utf8(broken[0], bad_lines.pop(broken[0]))
            continue
        too_long = sum(long_lines.pop(n, 0) for n in range(first_line, last_line + 1))
        if too_long:
            yield _oversize(first_line, too_long, limit)
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


def _iter_text(path: Path, limit: int, progress: Progress, *, block: bool) -> Iterator[SourceRecord]:
    """Plain text as `{"text": ...}` documents: one per line, or one per blank-line-separated block.

    Lines that are empty or only spaces separate documents and are none
    themselves. A block keeps its inner line breaks and is located by its
    first line; a line that is not UTF-8 makes its whole document an issue.
    """
    lines: list[str] = []
    start, size = 0, 0
    broken: SourceRecord | None = None
    bad: SourceRecord | None

    def document() -> SourceRecord:
        if broken is not None:
            return broken
        if size > limit:
            return _oversize(start, size, limit)
        return SourceRecord(start, value={"text": "\n".join(lines)})

    with _open_bytes(path) as (handle, position):
        for number, (raw, length) in enumerate(_lines_within(handle, limit), start=1):
            if number % 4096 == 0:
                progress(position())
            try:
                # A line over the limit is measured, not read: "x" stands for it (not blank, whatever it held).
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n") if raw else "x"
            except UnicodeDecodeError as error:
                text, bad = "x", _not_utf8(number, error)
            else:
                bad = None
            if not text.strip():
                if lines or broken:
                    yield document()
                lines, broken, size = [], None, 0
                continue
            if not lines and broken is None:
                start = number
            broken = broken or bad
            lines.append(text)
            size += length
            if not block:
                yield document()
                lines, broken, size = [], None, 0
        if lines or broken:
            yield document()
        progress(position())


def _iter_parquet(path: Path, limit: int, progress: Progress) -> Iterator[SourceRecord]:
    import pyarrow.parquet as pq  # imported here: pyarrow is heavy and only Parquet needs it

    try:
        parquet = pq.ParquetFile(path)
    except Exception as error:  # pyarrow raises several unrelated types for a bad file
        raise DataError(
            [Issue("unreadable Parquet file", file=str(path), expected="a Parquet file", found=str(error))]
        ) from error
    _refuse_large_row_groups(path, parquet.metadata)
    number = 0
    size = path.stat().st_size
    total = max(parquet.metadata.num_rows, 1)
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH):
        for value in batch.to_pylist():
            number += 1
            encoded = len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))
            yield _oversize(number, encoded, limit) if encoded > limit else SourceRecord(number, value=value)
        progress(size * number // total)


def _refuse_large_row_groups(path: Path, metadata: Any) -> None:
    """DataError naming the first row group over MAX_PARQUET_ROW_GROUP_BYTES (uncompressed), before any is read."""
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        if group.total_byte_size > MAX_PARQUET_ROW_GROUP_BYTES:
            raise DataError(
                [
                    Issue(
                        f"Parquet row group {index} is too large to read",
                        file=str(path),
                        expected=f"row groups of at most {MAX_PARQUET_ROW_GROUP_BYTES} bytes uncompressed "
                        "(write the file again with a smaller row_group_size)",
                        found=f"{group.total_byte_size} bytes in {group.num_rows} rows",
                    )
                ]
            )
