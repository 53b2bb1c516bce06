"""Line-level validation: every record checked against one format, every problem located.

`checked_rows` is the single streaming pass that both `validate_file` (which
keeps only counts and the first issues) and `load_dataset` (which keeps the
rows) are built on, so the two can never disagree about what is valid.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tunedeck.core.dataset_vocabulary import SOURCE_FORMATS
from tunedeck.core.errors import DataError, Issue
from tunedeck.data.formats import (
    DEFAULT_LABEL_COLUMN,
    KIND_OF_FORMAT,
    SIGNATURE_OF,
    SIGNATURES,
    detect_format,
    ignored_fields,
    normalise,
    refusal,
)
from tunedeck.data.manifest import ContentHasher
from tunedeck.data.readers import (
    MAX_ROW_BYTES,
    Progress,
    SourceRecord,
    dataset_files,
    detect_file_type,
    iter_records,
)

DEFAULT_MAX_ISSUES = 100
_EXPECTED_SHAPES = "; ".join(f"{name} ({', '.join(sorted(sig))})" for name, sig in SIGNATURES)


@dataclass(frozen=True, slots=True)  # slots: one is made per row, so construction cost counts
class CheckedRow:
    """One record after checking: its canonical row, or the issues that stop it (with file and line)."""

    line: int
    row: dict[str, Any] | None
    issues: tuple[Issue, ...] = ()
    fatal: bool = False
    source: str | None = None  # the shard file, when the dataset is a folder or pattern of shards


def load_json_schema(path: Path) -> dict[str, Any]:
    """Read and check a JSON Schema file for extraction outputs; a DataError names what is wrong."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
        Draft202012Validator.check_schema(schema)
    except FileNotFoundError:
        raise DataError(
            [Issue("schema file not found", file=str(path), expected="a JSON Schema file")]
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataError(
            [Issue("unreadable JSON Schema", file=str(path), expected="a JSON document", found=str(error))]
        ) from None
    except SchemaError as error:
        raise DataError(
            [
                Issue(
                    "invalid JSON Schema",
                    file=str(path),
                    field="/".join(map(str, error.path)) or None,
                    expected="a valid Draft 2020-12 schema",
                    found=error.message,
                )
            ]
        ) from None
    if not isinstance(schema, dict):
        raise DataError(
            [
                Issue(
                    "invalid JSON Schema",
                    file=str(path),
                    expected="a JSON object",
                    found=type(schema).__name__,
                )
            ]
        )
    return schema


def ignored_summary(counts: Mapping[str, int]) -> str:
    """`id (300 rows), source (12 rows)`: ignored fields, most frequent first."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} ({n} row{'s' if n != 1 else ''})" for name, n in ordered)


class RowChecker:
    """Checks records one at a time against one format, chosen up front or from the first recognisable row.

    Besides each row's verdict it counts the top-level fields the format ignores
    (`ignored`), so a report can name every field that does not reach training.
    """

    def __init__(
        self,
        file: str,
        source_format: str = "auto",
        schema: Mapping[str, Any] | None = None,
        label_column: str | None = None,
    ) -> None:
        if source_format != "auto" and source_format not in SOURCE_FORMATS:
            raise DataError(
                [
                    Issue(
                        "unknown dataset format",
                        file=file,
                        field="format",
                        expected="auto or one of " + ", ".join(SOURCE_FORMATS),
                        found=source_format,
                    )
                ]
            )
        if label_column is not None and label_column != DEFAULT_LABEL_COLUMN:
            if source_format not in ("auto", "classification"):
                raise DataError(
                    [
                        Issue(
                            "a label column applies only to classification datasets",
                            file=file,
                            field="label_column",
                            expected="format classification (or auto)",
                            found=f"format {source_format}",
                        )
                    ]
                )
            # Naming a label column says what the file is: classification, even when format is auto.
            source_format = "classification"
        self.label_column = label_column or DEFAULT_LABEL_COLUMN
        self.file = file
        self.explicit = source_format != "auto"
        self.source_format: str | None = source_format if self.explicit else None
        self._schema_validator: Any = None
        if schema is not None:
            from jsonschema import Draft202012Validator

            self._schema_validator = Draft202012Validator(schema)
        self._header_checked = False
        self._row_kind: str | None = None
        self.tabular = False
        self.ignored: Counter[str] = Counter()

    @property
    def kind(self) -> str | None:
        """The canonical kind of the file's rows, once known: set by the first valid row.

        Usually the format's kind; conversational prompt/completion rows make chat rows.
        """
        if self._row_kind is not None:
            return self._row_kind
        return KIND_OF_FORMAT[self.source_format] if self.source_format else None

    def signature(self, source_format: str) -> frozenset[str]:
        """The fields identifying `source_format`, with the chosen label column for classification."""
        if source_format == "classification":
            return frozenset({"text", self.label_column})
        return SIGNATURE_OF[source_format]

    def hints(self) -> list[str]:
        """Advice for fields a detected plain-text file ignores: they may be the labels of a classifier."""
        if self.explicit or self.source_format != "text":
            return []
        noun = "column" if self.tabular else "field"
        return [
            f"{noun} `{name}` is ignored; for classification use `--format classification --label-column {name}`"
            for name, _ in sorted(self.ignored.items(), key=lambda item: (-item[1], item[0]))
        ]

    def _located(
        self, record: SourceRecord, issues: list[Issue], fatal: bool = False, line: int | None = None
    ) -> CheckedRow:
        # A shard's issues name the shard, so `train-00002.jsonl:7` is where to look.
        file = record.source or self.file
        unit = record.unit if line is None else None
        line = record.line if line is None else line
        located = tuple(replace(i, file=file, line=line, unit=unit) for i in issues)
        return CheckedRow(line, None, located, fatal, record.source)

    def check(self, record: SourceRecord) -> CheckedRow:
        """Check one record: its canonical row, or every issue in it."""
        if record.issue is not None:
            return self._located(record, [record.issue], record.fatal)
        value = record.value
        if not isinstance(value, dict):
            return self._located(
                record,
                [Issue("not an object", expected="a JSON object per row", found=type(value).__name__)],
            )
        refused = refusal(value)
        if refused is not None:
            # The whole file is of that kind: one message, and no row of it is used.
            shape, reason = refused
            return self._located(
                record,
                [
                    Issue(
                        reason,
                        expected="rows for supervised fine-tuning (text, prompt/completion, chat, Alpaca, "
                        "ShareGPT, classification or extraction)",
                        found=f"{shape} with fields " + ", ".join(sorted(value)),
                    )
                ],
                fatal=True,
            )
        detected = detect_format(value, self.label_column)
        self.tabular = self.tabular or record.tabular
        if record.tabular and not self._header_checked:
            self._header_checked = True
            header_issue = self._check_header(value, detected)
            if header_issue is not None:
                return self._located(record, [header_issue], fatal=True, line=1)
        if self.source_format is None:
            if detected is None:
                return self._located(
                    record,
                    [
                        Issue(
                            "row matches no known format",
                            expected=_EXPECTED_SHAPES,
                            found="fields " + ", ".join(sorted(value)),
                        )
                    ],
                )
            self.source_format = detected
        fmt = self.source_format
        signature = self.signature(fmt)
        if (
            detected is not None
            and detected != fmt
            and (signature <= value.keys() or not signature & value.keys())
        ):
            origin = "given" if self.explicit else "detected from the first rows"
            return self._located(
                record,
                [
                    Issue(
                        "row of another format mixed in",
                        field="format",
                        expected=f"{fmt} ({origin}) with fields {', '.join(sorted(signature))}",
                        found=f"{detected} with fields {', '.join(sorted(value))}",
                    )
                ],
            )
        self.ignored.update(ignored_fields(value, fmt, self.label_column))
        row, issues = normalise(value, fmt, tabular=record.tabular, label_column=self.label_column)
        if row is not None and self._schema_validator is not None and fmt == "extraction":
            issues = [
                Issue(
                    "output does not match the JSON Schema",
                    field="output" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in e.path),
                    expected=f"{e.validator} {json.dumps(e.validator_value, default=str)[:60]}",
                    found=e.message[:120],
                )
                for e in self._schema_validator.iter_errors(row["output"])
            ]
            if issues:
                row = None
        if row is None:
            return self._located(record, issues)
        row_kind = "chat" if "messages" in row else KIND_OF_FORMAT[fmt]
        if self._row_kind is None:
            self._row_kind = row_kind
        elif row_kind != self._row_kind:
            return self._located(record, [self._kind_mismatch(fmt, row_kind)])
        return CheckedRow(record.line, row, source=record.source)

    def _kind_mismatch(self, fmt: str, row_kind: str) -> Issue:
        """A file's rows must all make one kind of canonical row; say which field decides it."""
        return Issue(
            "prompt/completion rows of two shapes in one file",
            field="prompt",
            expected=f"every row like the first valid one ({self._row_kind} rows): prompt and completion "
            "both text, or both lists of messages",
            found=f"a row making a {row_kind} row",
        )

    def _check_header(self, columns: Mapping[str, Any], detected: str | None) -> Issue | None:
        """A CSV header missing a column fails every row the same way: report it once, at line 1."""
        if self.source_format is None:
            if detected is None:
                return Issue(
                    "CSV columns match no known format",
                    field="header",
                    expected=_EXPECTED_SHAPES,
                    found="columns " + ", ".join(sorted(columns)),
                )
            return None
        missing = sorted(self.signature(self.source_format) - columns.keys())
        if missing:
            return Issue(
                "column missing from the CSV header",
                field=", ".join(missing),
                expected=f"columns {', '.join(sorted(self.signature(self.source_format)))}",
                found="columns " + ", ".join(sorted(columns)),
            )
        return None


def checked_rows(
    path: Path,
    source_format: str = "auto",
    *,
    file_type: str | None = None,
    schema_path: Path | None = None,
    max_row_bytes: int = MAX_ROW_BYTES,
    on_progress: Progress | None = None,
    text_split: str = "line",
    label_column: str | None = None,
) -> tuple[RowChecker, Iterator[CheckedRow]]:
    """Open `path` for one streaming pass: the checker (format known after the first rows) and its rows.

    Stops after a fatal issue, since nothing after it can be trusted. A missing
    file, unknown file type or bad schema raises DataError here, before the pass.
    `path` may be a folder or glob pattern of shards; `text_split` is how a
    plain-text file divides into documents ("line" or "block").
    """
    path = Path(path)
    kind_of_file = detect_file_type(path, file_type)
    dataset_files(path)  # a missing file, folder or shard is refused before the pass starts
    schema = load_json_schema(Path(schema_path)) if schema_path is not None else None
    if schema is not None and source_format not in ("auto", "extraction"):
        raise DataError(
            [
                Issue(
                    "a JSON Schema applies only to extraction datasets",
                    file=str(path),
                    field="format",
                    expected="extraction",
                    found=source_format,
                )
            ]
        )
    checker = RowChecker(str(path), source_format, schema, label_column)

    def rows() -> Iterator[CheckedRow]:
        records = iter_records(
            path, kind_of_file, max_row_bytes=max_row_bytes, on_progress=on_progress, text_split=text_split
        )
        for record in records:
            checked = checker.check(record)
            yield checked
            if checked.fatal:
                return

    return checker, rows()


@dataclass
class ValidationReport:
    """The outcome of validating a file: counts, the first `max_issues` issues, and the content hash."""

    path: str
    source_format: str | None
    kind: str | None
    rows_total: int = 0
    rows_valid: int = 0
    issues: list[Issue] = field(default_factory=list)
    issue_count: int = 0
    max_issues: int = DEFAULT_MAX_ISSUES
    sha256: str | None = None
    ignored_fields: dict[str, int] = field(default_factory=dict)
    hints: list[str] = field(default_factory=list)

    def note_checker(self, checker: RowChecker) -> None:
        """Take the format, kind, ignored fields and hints the checker settled on."""
        self.source_format, self.kind = checker.source_format, checker.kind
        self.ignored_fields = dict(checker.ignored.most_common())
        self.hints = checker.hints()

    @property
    def ok(self) -> bool:
        """True when every row is valid and there is at least one."""
        return self.issue_count == 0 and self.rows_valid > 0

    @property
    def rows_invalid(self) -> int:
        """Rows that failed a check."""
        return self.rows_total - self.rows_valid

    def add(self, issues: tuple[Issue, ...] | list[Issue]) -> None:
        """Count `issues`, keeping them only while under the cap."""
        for issue in issues:
            self.issue_count += 1
            if len(self.issues) < self.max_issues:
                self.issues.append(issue)

    def error(self) -> DataError:
        """The DataError that lists this report's issues."""
        more = self.issue_count - len(self.issues)
        title = f"invalid dataset {self.path}: {self.issue_count} issue(s) in {self.rows_total} row(s)"
        if more > 0:
            title += f" (showing the first {len(self.issues)})"
        return DataError(list(self.issues), title=title)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for `--json` output and the service."""
        return {
            "path": self.path,
            "ok": self.ok,
            "format": self.source_format,
            "kind": self.kind,
            "rows_total": self.rows_total,
            "rows_valid": self.rows_valid,
            "rows_invalid": self.rows_invalid,
            "issue_count": self.issue_count,
            "issues_shown": len(self.issues),
            "sha256": self.sha256,
            "ignored_fields": self.ignored_fields,
            "hints": self.hints,
            "issues": [issue.to_dict() for issue in self.issues],
        }


def validate_file(
    path: Path,
    format: str = "auto",
    *,
    file_type: str | None = None,
    schema_path: Path | None = None,
    max_issues: int = DEFAULT_MAX_ISSUES,
    max_row_bytes: int = MAX_ROW_BYTES,
    on_progress: Progress | None = None,
    text_split: str = "line",
    label_column: str | None = None,
) -> ValidationReport:
    """Validate `path` in one streaming pass, holding one row at a time, never the whole file.

    Returns a report rather than raising for bad rows, so a caller can show
    every issue; call `report.error()` to raise. A missing file or unknown
    format still raises DataError at once. `label_column` names a classification
    label field other than `label` (and implies the classification format).
    """
    checker, rows = checked_rows(
        Path(path),
        format,
        file_type=file_type,
        schema_path=schema_path,
        max_row_bytes=max_row_bytes,
        on_progress=on_progress,
        text_split=text_split,
        label_column=label_column,
    )
    report = ValidationReport(str(path), None, None, max_issues=max_issues)
    hasher = ContentHasher()
    for checked in rows:
        report.rows_total += 0 if checked.fatal else 1
        if checked.row is not None:
            report.rows_valid += 1
            hasher.add(checked.row)
        else:
            report.add(checked.issues)
    report.note_checker(checker)
    if report.rows_total == 0 and report.issue_count == 0:
        report.add(
            [Issue("no rows", file=str(path), expected="at least one row", found="no rows in the file")]
        )
    report.sha256 = hasher.hexdigest() if report.ok else None
    return report
