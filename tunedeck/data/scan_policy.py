"""Scan a dataset's rows, report findings by type, and apply its policy: warn, block or redact.

- warn (default): the report is returned; training goes ahead.
- block: a DataError lists each finding (masked) with its row and field.
- redact: the findings are replaced by `[REDACTED:<type>]` and the result is
  registered as a new version, whose parent is the scanned content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.core.dataset_vocabulary import POLICIES
from tunedeck.core.errors import DataError, Issue
from tunedeck.data.loading import LoadedDataset
from tunedeck.data.registry import DatasetRegistry, DatasetVersion
from tunedeck.data.scan import Finding, find_spans, findings_in, redact_text, secret_plugins


def iter_strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside a canonical row, with its field path (`messages[1].content`)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from iter_strings(item, f"{path}[{index}]")


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of `value` with `change` applied to every string in it."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [map_strings(item, change) for item in value]
    return value


@dataclass
class ScanReport:
    """Findings of a dataset scan, with counts by type and rows referenced by source line."""

    rows_scanned: int
    findings: list[Finding] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Findings per type, most frequent first."""
        return dict(Counter(f.type for f in self.findings).most_common())

    def rows_by_type(self) -> dict[str, list[int]]:
        """The source lines holding each type of finding."""
        rows: dict[str, set[int]] = {}
        for finding in self.findings:
            if finding.row is not None:
                rows.setdefault(finding.type, set()).add(finding.row)
        return {type_id: sorted(lines) for type_id, lines in rows.items()}

    @property
    def clean(self) -> bool:
        """True when nothing was found."""
        return not self.findings

    def issues(self, file: str | None = None) -> list[Issue]:
        """One issue per finding, for a blocking policy."""
        return [finding_issue(f, file) for f in self.findings]

    def to_dict(self, max_findings: int = 1000) -> dict[str, Any]:
        """JSON-ready form; findings are already masked."""
        return {
            "rows_scanned": self.rows_scanned,
            "clean": self.clean,
            "counts": self.counts(),
            "rows_by_type": self.rows_by_type(),
            "finding_count": len(self.findings),
            "findings": [f.to_dict() for f in self.findings[:max_findings]],
        }


def finding_issue(finding: Finding, file: str | None = None) -> Issue:
    """The issue a blocking policy reports for one finding (its excerpt is already masked)."""
    return Issue(
        f"{finding.category} data found: {finding.type}",
        field=finding.field,
        file=file,
        line=finding.row,
        expected="no secrets or personal data",
        found=finding.excerpt,
    )


def scan_rows(
    rows: Sequence[dict[str, Any]],
    line_numbers: Sequence[int] | None = None,
    *,
    secrets: bool = True,
    personal: bool = True,
    on_progress: Callable[[int], None] | None = None,
) -> ScanReport:
    """Scan every string of every row; findings name the row's source line and the field."""
    report = ScanReport(rows_scanned=len(rows))
    with secret_plugins():
        for index, row in enumerate(rows):
            line = line_numbers[index] if line_numbers is not None else index + 1
            for path, text in iter_strings(row):
                spans = find_spans(text, secrets=secrets, personal=personal)
                if spans:
                    report.findings += findings_in(text, spans, row=line, field=path)
            if on_progress is not None and index % 1000 == 999:
                on_progress(index + 1)
    return report


def scan_dataset(loaded: LoadedDataset, **options: Any) -> ScanReport:
    """Scan a loaded dataset's rows."""
    return scan_rows(loaded.rows, loaded.line_numbers, **options)


def scan_artifact(path: Path) -> ScanReport:
    """Scan a text artifact before export (model card, config, log); findings name its lines."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    report = ScanReport(rows_scanned=text.count("\n") + 1)
    with secret_plugins():
        spans = find_spans(text)
        for finding in findings_in(text, spans):
            report.findings.append(
                Finding(**{**finding.__dict__, "row": text.count("\n", 0, finding.start) + 1})
            )
    return report


def redact_rows(
    rows: Sequence[dict[str, Any]], *, secrets: bool = True, personal: bool = True
) -> list[dict[str, Any]]:
    """Copies of `rows` with every finding replaced by `[REDACTED:<type>]`."""
    with secret_plugins():
        return [
            map_strings(
                row, lambda text: redact_text(text, find_spans(text, secrets=secrets, personal=personal))
            )
            for row in rows
        ]


@dataclass(frozen=True)
class PolicyOutcome:
    """What applying a policy did: the report, and the redacted version when one was written."""

    policy: str
    report: ScanReport
    redacted: DatasetVersion | None = None


def apply_scan_policy(
    loaded: LoadedDataset,
    report: ScanReport,
    policy: str = "warn",
    *,
    registry: DatasetRegistry | None = None,
    name: str | None = None,
) -> PolicyOutcome:
    """Apply `policy` to a scanned dataset: warn returns, block raises, redact registers a new version.

    Redact needs `registry`; the version goes under `name` (default: the
    dataset's manifest name) and names the scanned content as its parent.
    """
    if policy not in POLICIES:
        raise DataError(
            [Issue("unknown scan policy", field="policy", expected=" | ".join(POLICIES), found=policy)]
        )
    if policy == "warn" or report.clean:
        return PolicyOutcome(policy, report)
    if policy == "block":
        raise DataError(
            report.issues(str(loaded.path)),
            title=f"{len(report.findings)} secret(s) or personal data found in {loaded.path}",
        )
    if registry is None:
        raise DataError(
            [
                Issue(
                    "redaction needs a registry to write the new version",
                    field="root",
                    expected="a registry folder",
                    found="none",
                )
            ]
        )
    rows = redact_rows(loaded.rows)
    version = registry.register_rows(
        rows,
        name or loaded.manifest.name,
        kind=loaded.kind,
        source_format=loaded.source_format,
        parent=loaded.manifest.sha256,
        split=loaded.manifest.split,
        sealed=loaded.manifest.sealed,
        notes={"redacted": report.counts(), **({"column_map": loaded.column_map} if loaded.column_map else {})},
    )
    return PolicyOutcome(policy, report, version)
