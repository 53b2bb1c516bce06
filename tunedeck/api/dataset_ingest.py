"""Turn a received upload into a validated, canonical dataset file plus its reports.

Runs in a worker thread (it reads the whole file). Errors name the client's file
name, never the generated path on the server, so nothing about the server's
layout leaks into a response.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.dedup import find_duplicates
from tunedeck.data.loading import LoadedDataset, load_dataset
from tunedeck.data.manifest import ContentHasher
from tunedeck.data.scan_policy import POLICIES, redact_rows, scan_rows

MAX_REPORTED_ISSUES = 100
SCAN_SAMPLE_ROWS = 20_000
PREVIEW_ROWS = 100


class TooManyRows(Exception):
    """The dataset has more rows than the server accepts."""

    def __init__(self, rows: int, limit: int) -> None:
        super().__init__(f"dataset has {rows} rows, more than the limit of {limit}")
        self.rows = rows
        self.limit = limit


@dataclass
class IngestedDataset:
    """A valid dataset: its canonical JSONL file, manifest and reports."""

    canonical_path: Path
    manifest: dict[str, Any]
    preview: list[dict[str, Any]] = field(default_factory=list)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: int = 0
    size_bytes: int = 0

    def discard(self) -> None:
        """Remove the canonical file (it lives in scratch space until stored)."""
        self.canonical_path.unlink(missing_ok=True)


def _relabel(issue: Issue, display: str) -> Issue:
    return replace(issue, file=display) if issue.file is not None else issue


def ingest_file(
    path: Path,
    *,
    display_name: str,
    format: str = "auto",
    file_type: str | None = None,
    drop_invalid: bool = False,
    max_rows: int,
    scan_policy: str = "warn",
) -> IngestedDataset:
    """Validate and normalise `path`; raise DataError (every issue located) or TooManyRows.

    `scan_policy` is what secrets and personal data do: `warn` reports them (a sample of
    large files is scanned), `block` refuses the upload with every finding located and
    masked, `redact` stores the rows with each finding replaced by `[REDACTED:<type>]`
    (the raw rows are never stored). The canonical file is written next to `path` with
    the same generated stem; the first PREVIEW_ROWS rows are kept for previews.
    """
    if scan_policy not in POLICIES:
        raise DataError([Issue("unknown scan policy", field="scan_policy", expected=" | ".join(POLICIES),
                               found=scan_policy)])
    try:
        loaded = load_dataset(
            path,
            format,
            drop_invalid=drop_invalid,
            file_type=file_type,
            name=display_name,
            max_issues=MAX_REPORTED_ISSUES,
        )
    except DataError as error:
        title = error.title.replace(str(path), display_name)
        raise DataError([_relabel(issue, display_name) for issue in error.issues], title=title) from None
    if len(loaded.rows) > max_rows:
        raise TooManyRows(len(loaded.rows), max_rows)
    scan = _scan_report(loaded, scan_policy, display_name)
    if scan.get("redacted"):
        loaded = _redacted(loaded)
    canonical = path.with_name(path.stem + ".canonical.jsonl")
    written = _write_canonical(loaded, canonical)
    reports = {
        "validation": _validation_report(loaded, display_name),
        "dedup": _dedup_report(loaded),
        "scan": scan,
    }
    return IngestedDataset(
        canonical_path=canonical,
        manifest=loaded.manifest.to_dict(),
        preview=loaded.rows[:PREVIEW_ROWS],
        reports=reports,
        rows=len(loaded.rows),
        size_bytes=written,
    )


def _write_canonical(loaded: LoadedDataset, target: Path) -> int:
    hasher = ContentHasher()
    with open(target, "x", encoding="utf-8") as handle:
        for row in loaded.rows:
            handle.write(hasher.add(row) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    # The canonical bytes are what the manifest hash covers; a mismatch is a bug, not bad input.
    assert hasher.hexdigest() == loaded.manifest.sha256
    return target.stat().st_size


def _validation_report(loaded: LoadedDataset, display_name: str) -> dict[str, Any]:
    dropped_lines = loaded.dropped_lines
    return {
        "file": display_name,
        "ok": not loaded.dropped,
        "format": loaded.source_format,
        "kind": loaded.kind,
        "rows_total": len(loaded.rows) + len(dropped_lines),
        "rows_valid": len(loaded.rows),
        "rows_dropped": len(dropped_lines),
        "dropped_lines": dropped_lines[:MAX_REPORTED_ISSUES],
        "issues": [_relabel(i, display_name).to_dict() for i in loaded.dropped[:MAX_REPORTED_ISSUES]],
    }


def _dedup_report(loaded: LoadedDataset) -> dict[str, Any]:
    report = find_duplicates({"train": loaded}).to_dict()
    report["pairs_shown"] = min(len(report["pairs"]), MAX_REPORTED_ISSUES)
    report["pairs"] = report["pairs"][:MAX_REPORTED_ISSUES]
    return report


def _scan_report(loaded: LoadedDataset, policy: str, display_name: str) -> dict[str, Any]:
    # The secret detectors cost about a millisecond per string: under `warn`, scanning a sample
    # keeps an upload of millions of rows from holding a request for hours (the report says so).
    # A policy that refuses or rewrites rows must see every row.
    sampled = policy == "warn" and len(loaded.rows) > SCAN_SAMPLE_ROWS
    limit = SCAN_SAMPLE_ROWS if sampled else len(loaded.rows)
    found = scan_rows(loaded.rows[:limit], loaded.line_numbers[:limit])
    if policy == "block" and not found.clean:
        raise DataError(found.issues(display_name)[:MAX_REPORTED_ISSUES],
                        title=f"{len(found.findings)} secret(s) or personal data found in {display_name} "
                              "(scan policy: block)")
    report = found.to_dict(max_findings=MAX_REPORTED_ISSUES)
    report["sampled"] = sampled
    report["policy"] = policy
    report["redacted"] = found.counts() if policy == "redact" and not found.clean else {}
    return report


def _redacted(loaded: LoadedDataset) -> LoadedDataset:
    """The same dataset with every finding masked; its manifest names the scanned content as parent."""
    rows = redact_rows(loaded.rows)
    hasher = ContentHasher()
    for row in rows:
        hasher.add(row)
    manifest = replace(loaded.manifest, sha256=hasher.hexdigest(), parent=loaded.manifest.sha256,
                       notes={**loaded.manifest.notes, "redacted": True})
    return replace(loaded, rows=rows, manifest=manifest)
