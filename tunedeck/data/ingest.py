"""Turn an uploaded file into a validated canonical dataset file and its reports, in one streaming pass.

Memory does not grow with the rows' content: each row is read, checked, scanned
(under the upload's policy), written to the canonical file and hashed, then
forgotten. What is kept per row is what deduplication needs (see
`dedup_stream`); every list that goes into a report is capped.

Policies for secrets and personal data: `warn` scans the first SCAN_SAMPLE_ROWS
rows and reports (the report says when it sampled); `block` scans every row and
refuses the upload, every finding located and masked; `redact` scans every row
and stores it with each finding replaced by `[REDACTED:<type>]` (raw rows are
never written).

Errors name the client's file name (`display_name`), never the path on the
worker, so nothing about the server's layout reaches a response.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from tunedeck.core.dataset_vocabulary import POLICIES
from tunedeck.core.errors import DataError, Issue
from tunedeck.data.dedup_stream import StreamingDuplicateFinder
from tunedeck.data.manifest import ContentHasher, DatasetManifest
from tunedeck.data.scan import Finding, find_spans, findings_in, redact_text, secret_plugins
from tunedeck.data.scan_policy import finding_issue, iter_strings, map_strings
from tunedeck.data.validation import CheckedRow, RowChecker, ValidationReport, checked_rows

MAX_REPORTED_ISSUES = 100
MAX_ROWS_PER_TYPE = 1000
SCAN_SAMPLE_ROWS = 20_000

# (bytes read, bytes in the file): how far the pass has gone.
IngestProgress = Callable[[int, int], None]


class TooManyRowsError(DataError):
    """The file has more rows than the server accepts in one dataset."""

    def __init__(self, display_name: str, limit: int) -> None:
        super().__init__(
            [Issue("too many rows", file=display_name, expected=f"at most {limit} rows", found=f"more than {limit}")],
            title=f"{display_name} has more than {limit} rows, the most this server accepts in one dataset",
        )


@dataclass
class IngestedDataset:
    """What an ingestion produced: the canonical file's manifest, a preview and the reports."""

    manifest: dict[str, Any]
    preview: list[dict[str, Any]]
    reports: dict[str, dict[str, Any]]
    rows: int
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the ingestion process answers)."""
        return asdict(self)


@dataclass
class _ScanTally:
    """Scan findings counted in full, located in part (the report's lists are capped)."""

    policy: str
    rows_scanned: int = 0
    count: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    rows_by_type: dict[str, list[int]] = field(default_factory=dict)
    shown: list[Finding] = field(default_factory=list)

    def add(self, findings: list[Finding]) -> None:
        self.count += len(findings)
        for finding in findings:
            self.by_type[finding.type] += 1
            lines = self.rows_by_type.setdefault(finding.type, [])
            if finding.row is not None and len(lines) < MAX_ROWS_PER_TYPE and (not lines or lines[-1] != finding.row):
                lines.append(finding.row)
            if len(self.shown) < MAX_REPORTED_ISSUES:
                self.shown.append(finding)

    def report(self, sampled: bool) -> dict[str, Any]:
        return {
            "rows_scanned": self.rows_scanned,
            "clean": self.count == 0,
            "counts": dict(self.by_type.most_common()),
            "rows_by_type": self.rows_by_type,
            "finding_count": self.count,
            "findings": [finding.to_dict() for finding in self.shown],
            "sampled": sampled,
            "policy": self.policy,
            "redacted": dict(self.by_type.most_common()) if self.policy == "redact" and self.count else {},
        }


@dataclass(frozen=True)
class UploadOptions:
    """What the uploader asked for, and the server's row limit."""

    display_name: str
    max_rows: int
    format: str = "auto"
    file_type: str | None = None
    label_column: str | None = None
    column_map: dict[str, str] = field(default_factory=dict)
    drop_invalid: bool = False
    scan_policy: str = "warn"
    preview_rows: int = 100


def ingest_upload(
    path: Path, out: Path, options: UploadOptions, *, scratch: Path, on_progress: IngestProgress | None = None
) -> IngestedDataset:
    """Validate and normalise `path` into the canonical JSONL file `out`; raise DataError or TooManyRowsError.

    `scratch` holds deduplication's files (the caller removes it); the first `preview_rows`
    canonical rows are kept for previews. Nothing is left at `out` when the upload is refused.
    """
    if options.scan_policy not in POLICIES:
        raise DataError([Issue("unknown scan policy", field="scan_policy", expected=" | ".join(POLICIES),
                               found=options.scan_policy)])  # fmt: skip
    duplicates = StreamingDuplicateFinder(scratch)
    try:
        return _ingest(path, out, options, duplicates, on_progress)
    except DataError as error:
        out.unlink(missing_ok=True)
        if isinstance(error, TooManyRowsError):
            raise
        title = error.title.replace(str(path), options.display_name)
        raise DataError([_relabel(issue, options.display_name) for issue in error.issues], title=title) from None
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    finally:
        duplicates.close()


def _ingest(
    path: Path,
    out: Path,
    options: UploadOptions,
    duplicates: StreamingDuplicateFinder,
    on_progress: IngestProgress | None,
) -> IngestedDataset:
    display_name = options.display_name
    total_bytes = path.stat().st_size
    checker, stream = checked_rows(
        path, options.format, file_type=options.file_type, label_column=options.label_column,
        column_map=options.column_map,
        on_progress=(lambda done: on_progress(done, total_bytes)) if on_progress else None,
    )  # fmt: skip
    tally = _RowTally(
        scan=_ScanTally(options.scan_policy),
        validation=ValidationReport(display_name, None, None, max_issues=MAX_REPORTED_ISSUES),
    )
    with open(out, "x", encoding="utf-8") as handle, secret_plugins():
        for checked in stream:
            _take_row(checked, tally, handle, options, duplicates)
        handle.flush()
        os.fsync(handle.fileno())
    _refuse_unusable(tally, options)
    return _ingested(checker, tally, options, duplicates, out)


@dataclass
class _RowTally:
    """What one pass over the rows has counted and kept so far."""

    scan: _ScanTally
    validation: ValidationReport
    source_hasher: ContentHasher = field(default_factory=ContentHasher)
    stored_hasher: ContentHasher = field(default_factory=ContentHasher)
    preview: list[dict[str, Any]] = field(default_factory=list)
    dropped_lines: list[int] = field(default_factory=list)
    dropped_rows: int = 0
    rows: int = 0
    fatal: bool = False


def _take_row(
    checked: CheckedRow,
    tally: _RowTally,
    handle: TextIO,
    options: UploadOptions,
    duplicates: StreamingDuplicateFinder,
) -> None:
    """Count a rejected row; write a valid one (scanned, and redacted under the "redact" policy) to `handle`."""
    policy = options.scan_policy
    if checked.row is None:
        tally.fatal = tally.fatal or checked.fatal
        tally.validation.add(checked.issues)
        if not checked.line:
            return  # an issue about the whole file (a mapped field in no row), not a row
        tally.dropped_rows += 1
        if len(tally.dropped_lines) < MAX_REPORTED_ISSUES:
            tally.dropped_lines.append(checked.line)
        return
    tally.rows += 1
    if tally.rows > options.max_rows:
        raise TooManyRowsError(options.display_name, options.max_rows)
    row = checked.row
    tally.source_hasher.add(row)
    if policy != "warn" or tally.rows <= SCAN_SAMPLE_ROWS:
        found = _scan_row(row, checked.line)
        tally.scan.rows_scanned += 1
        if found:
            tally.scan.add(found)
            if policy == "redact":
                row = map_strings(row, lambda text: redact_text(text, find_spans(text)))
    handle.write(tally.stored_hasher.add(row) + "\n")
    duplicates.add(row, checked.line)
    if len(tally.preview) < options.preview_rows:
        tally.preview.append(row)


def _refuse_unusable(tally: _RowTally, options: UploadOptions) -> None:
    """Raise when the file has no rows, invalid rows that may not be dropped, or (policy "block") secrets."""
    display_name, rows, dropped_rows = options.display_name, tally.rows, tally.dropped_rows
    validation, scan = tally.validation, tally.scan
    if not rows and not dropped_rows:
        raise DataError([Issue("no rows", file=display_name, expected="at least one row", found="no rows in the file")])
    validation.rows_total, validation.rows_valid = rows + dropped_rows, rows
    if validation.issue_count and (tally.fatal or not options.drop_invalid or not rows):
        raise validation.error()
    if options.scan_policy == "block" and scan.count:
        raise DataError(
            [finding_issue(finding, display_name) for finding in scan.shown],
            title=f"{scan.count} secret(s) or personal data found in {display_name} (scan policy: block)",
        )


def _ingested(
    checker: RowChecker,
    tally: _RowTally,
    options: UploadOptions,
    duplicates: StreamingDuplicateFinder,
    out: Path,
) -> IngestedDataset:
    """The stored file's manifest, preview and reports (validation, duplicates, scan)."""
    assert checker.source_format is not None and checker.kind is not None  # set by the first valid row
    display_name, policy, scan, validation = options.display_name, options.scan_policy, tally.scan, tally.validation
    rows, dropped_rows = tally.rows, tally.dropped_rows
    redacted = policy == "redact" and scan.count > 0
    manifest = DatasetManifest(
        name=display_name,
        sha256=tally.stored_hasher.hexdigest(),
        format=checker.source_format,
        kind=checker.kind,
        rows=rows,
        dropped=dropped_rows,
        parent=tally.source_hasher.hexdigest() if redacted else None,
        notes=_notes(redacted, checker.column_map),
    )
    validation_report = {
        "file": display_name,
        "ok": not validation.issue_count,
        "format": checker.source_format,
        "kind": checker.kind,
        "rows_total": rows + dropped_rows,
        "rows_valid": rows,
        "rows_dropped": dropped_rows,
        "dropped_lines": tally.dropped_lines,
        "ignored_fields": dict(checker.ignored.most_common()),
        "hints": checker.hints(),
        "column_map": dict(checker.column_map),
        "issues": [_relabel(issue, display_name).to_dict() for issue in validation.issues],
    }
    return IngestedDataset(
        manifest=manifest.to_dict(),
        preview=tally.preview,
        reports={
            "validation": validation_report,
            "dedup": duplicates.report(MAX_REPORTED_ISSUES),
            "scan": scan.report(sampled=policy == "warn" and rows > SCAN_SAMPLE_ROWS),
        },
        rows=rows,
        size_bytes=out.stat().st_size,
    )


def _notes(redacted: bool, column_map: dict[str, str]) -> dict[str, Any]:
    """The manifest's notes: whether rows were redacted, and how the file's fields were renamed."""
    notes: dict[str, Any] = {}
    if redacted:
        notes["redacted"] = True
    if column_map:
        # How the rows were read is part of the version: the same file mapped otherwise is another one.
        notes["column_map"] = dict(column_map)
    return notes


def _scan_row(row: dict[str, Any], line: int) -> list[Finding]:
    found: list[Finding] = []
    for path, text in iter_strings(row):
        spans = find_spans(text)
        if spans:
            found += findings_in(text, spans, row=line, field=path)
    return found


def _relabel(issue: Issue, display: str) -> Issue:
    return replace(issue, file=display) if issue.file is not None else issue
