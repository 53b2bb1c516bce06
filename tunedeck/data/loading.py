"""Load a dataset file into canonical rows, or fail with every problem located.

This is the entry point the engine, the registry and the CLI share:

    loaded = load_dataset(Path("train.jsonl"))             # format detected
    loaded = load_dataset(path, "alpaca", drop_invalid=True)
    loaded.rows, loaded.kind, loaded.manifest.sha256
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.manifest import ContentHasher, DatasetManifest
from tunedeck.data.readers import MAX_ROW_BYTES, Progress
from tunedeck.data.validation import DEFAULT_MAX_ISSUES, CheckedRow, RowChecker, ValidationReport, checked_rows


@dataclass
class LoadedDataset:
    """A validated dataset in memory: canonical rows, where each came from, and its manifest.

    `line_numbers[i]` is the source line (JSONL, CSV, TSV, text) or row (JSON
    array, Parquet) of `rows[i]` (within its shard, for a folder or pattern of
    shards). `dropped` lists the issues of rows skipped under `drop_invalid`;
    they name the shard.
    `ignored_fields` counts, by name, the rows whose top-level field the format
    does not read; `hints` suggests how such fields could be used.
    """

    path: Path
    kind: str
    source_format: str
    rows: list[dict[str, Any]]
    line_numbers: list[int]
    manifest: DatasetManifest
    dropped: list[Issue] = field(default_factory=list)
    ignored_fields: dict[str, int] = field(default_factory=dict)
    hints: list[str] = field(default_factory=list)
    column_map: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def dropped_lines(self) -> list[int]:
        """The distinct source lines of dropped rows, in file order."""
        return sorted({issue.line for issue in self.dropped if issue.line is not None})


def _dropped_rows(issues: list[Issue]) -> int:
    """Distinct rows among `issues` (a row may have several); shards each number their rows from 1."""
    # An issue without a line is about the whole file (a mapped field in no row), not one more row.
    return len({(issue.file, issue.line) for issue in issues if issue.line is not None})


def load_dataset(
    path: Path | str,
    format: str = "auto",
    *,
    drop_invalid: bool = False,
    schema_path: Path | str | None = None,
    max_issues: int = DEFAULT_MAX_ISSUES,
    name: str | None = None,
    file_type: str | None = None,
    max_row_bytes: int = MAX_ROW_BYTES,
    on_progress: Progress | None = None,
    text_split: str = "line",
    label_column: str | None = None,
    column_map: Mapping[str, str] | None = None,
) -> LoadedDataset:
    """Read, check and normalise every row of `path`.

    `format` is "auto" (detected from the first recognisable row) or a source
    format (text, prompt_completion, chat, alpaca, sharegpt, classification,
    extraction); `file_type` overrides the extension (jsonl, json, csv, tsv,
    text, parquet); a `.gz` file is read decompressed. `path` may be a folder
    or glob pattern of shards, read in name order as one dataset. `text_split`
    is "line" (a document per line) or "block" (per blank-line-separated
    block) for plain text.
    Raises DataError listing every issue (up to `max_issues`) unless
    `drop_invalid`, in which case bad rows are skipped and listed in `dropped`.
    Problems that make the rest of a file unreadable, and a file with no valid
    row, raise even with `drop_invalid`. `label_column` names a classification
    label field other than `label` (and implies the classification format);
    `column_map` renames fields (target -> source, e.g. `{"instruction": "question"}`)
    before format detection, and is kept as `column_map` (with the label column as its
    `label` pair).
    """
    path = Path(path)
    checker, stream = checked_rows(
        path,
        format,
        file_type=file_type,
        schema_path=Path(schema_path) if schema_path is not None else None,
        max_row_bytes=max_row_bytes,
        on_progress=on_progress,
        text_split=text_split,
        label_column=label_column,
        column_map=column_map,
    )
    report = ValidationReport(str(path), None, None, max_issues=max_issues)
    read = _read_rows(stream, report)
    rows, dropped = read.rows, read.dropped
    report.rows_total = len(rows) + _dropped_rows(dropped)
    report.rows_valid = len(rows)
    report.note_checker(checker)
    if not rows and not dropped:
        raise DataError(
            [Issue("no rows", file=str(path), expected="at least one row", found="no rows in the file")]
        )
    if report.issue_count and (read.fatal or not drop_invalid or not rows):
        raise report.error()
    return _loaded_dataset(path, name, checker, report, read)


@dataclass
class _ReadRows:
    """One pass over the checked rows: the valid rows with their line numbers and hash, and the issues."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    dropped: list[Issue] = field(default_factory=list)
    hasher: ContentHasher = field(default_factory=ContentHasher)
    fatal: bool = False


def _read_rows(stream: Iterator[CheckedRow], report: ValidationReport) -> _ReadRows:
    """Keep each valid row; add each invalid one's issues to `report` (and to the dropped list)."""
    read = _ReadRows()
    for checked in stream:
        if checked.row is not None:
            read.rows.append(checked.row)
            read.lines.append(checked.line)
            read.hasher.add(checked.row)
            continue
        read.fatal = read.fatal or checked.fatal
        report.add(checked.issues)
        read.dropped.extend(checked.issues)
    return read


def _loaded_dataset(
    path: Path, name: str | None, checker: RowChecker, report: ValidationReport, read: _ReadRows
) -> LoadedDataset:
    """The loaded dataset with its manifest, once the rows passed."""
    assert checker.source_format is not None and checker.kind is not None  # set by the first valid row
    manifest = DatasetManifest(
        name=name or path.stem,
        sha256=read.hasher.hexdigest(),
        format=checker.source_format,
        kind=checker.kind,
        rows=len(read.rows),
        dropped=_dropped_rows(read.dropped),
    )
    return LoadedDataset(
        path=path,
        kind=checker.kind,
        source_format=checker.source_format,
        rows=read.rows,
        line_numbers=read.lines,
        manifest=manifest,
        dropped=read.dropped,
        ignored_fields=report.ignored_fields,
        hints=report.hints,
        column_map=dict(checker.column_map),
    )
