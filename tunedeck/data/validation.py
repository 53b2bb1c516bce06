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

from tunedeck.core.dataset_vocabulary import SIGNATURE_OF, SIGNATURES, SOURCE_FORMATS
from tunedeck.core.errors import DataError, Issue
from tunedeck.data.formats.classification import DEFAULT_LABEL_COLUMN
from tunedeck.data.formats.preference import is_preference_row
from tunedeck.data.formats.registry import KIND_OF_FORMAT, detect_format, ignored_fields, normalise, refusal
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


def _with_label_column(file: str, column_map: dict[str, str], label_column: str | None) -> dict[str, str]:
    """The column mapping with a label column as its `label=NAME` pair; naming `label` both ways is refused."""
    if label_column is None:
        return column_map
    if DEFAULT_LABEL_COLUMN in column_map and column_map[DEFAULT_LABEL_COLUMN] != label_column:
        raise DataError(
            [
                Issue(
                    "the label is named twice",
                    file=file,
                    field="label_column",
                    expected=f"either a label column or a mapping {DEFAULT_LABEL_COLUMN}=NAME, not both",
                    found=f"label column {label_column!r} and mapping "
                    f"{DEFAULT_LABEL_COLUMN}={column_map[DEFAULT_LABEL_COLUMN]}",
                )
            ]
        )
    if label_column == DEFAULT_LABEL_COLUMN:
        return column_map  # the label is where the format looks for it: nothing to rename
    return {**column_map, DEFAULT_LABEL_COLUMN: label_column}


def ignored_summary(counts: Mapping[str, int]) -> str:
    """`id (300 rows), source (12 rows)`: ignored fields, most frequent first."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} ({n} row{'s' if n != 1 else ''})" for name, n in ordered)


def _nested_rows_hint(value: dict[str, Any]) -> str:
    """When a record wraps a list of objects (`{"data": [...]}`), say that those may be the rows."""
    for name, inner in value.items():
        if isinstance(inner, list) and inner and all(isinstance(item, dict) for item in inner):
            return (f"; its field `{name}` holds a list of {len(inner)} objects: if those are the rows, put them "
                    "in a top-level JSON array, or one per line (JSON Lines)")  # fmt: skip
    return ""


def _label_like(value: Any) -> bool:
    """A value that could name a class: a short string, a whole number or a boolean."""
    if isinstance(value, str):
        return 0 < len(value.strip()) <= 64
    return isinstance(value, bool | int)


def _refusal_issue(value: dict[str, Any]) -> Issue | None:
    """The issue of a record whose shape says the whole file is not text rows (see `refusal`); None otherwise."""
    refused = refusal(value)
    if refused is None:
        return None
    shape, reason = refused
    return Issue(
        reason,
        expected="text rows (text, prompt/completion, chat, Alpaca, ShareGPT, classification, "
        "extraction or preference rows)",
        found=f"{shape} with fields " + ", ".join(sorted(value)),
    )

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
        column_map: Mapping[str, str] | None = None,
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
        self.column_map = _with_label_column(file, dict(column_map or {}), label_column)
        # One rule for renamed fields: a label column is the mapping `label=NAME`, so rows always
        # carry their label as `label` once mapped.
        self.label_column = DEFAULT_LABEL_COLUMN
        self._sources = frozenset(self.column_map.values())
        self._targets = frozenset(self.column_map)
        self._source_of = dict(self.column_map)
        self._seen_sources: set[str] = set()
        self._reported_sources: set[str] = set()
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
        # Ignored fields holding one short value on every valid row: what a label column looks like.
        self._label_like: Counter[str] = Counter()
        self._valid_rows = 0
        self._preference_form_seen: str | None = None

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
            for name, count in sorted(self._label_like.items(), key=lambda item: (-item[1], item[0]))
            if self._valid_rows and count == self._valid_rows
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

    def _mapped(self, value: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The record with its fields renamed by the column mapping, and the file's fields a target replaced.

        A mapped target always comes from its source: a field of the target's name that the
        file has anyway is dropped (and reported as ignored), even in a row without the source.
        """
        kept = {k: v for k, v in value.items() if k not in self._sources and k not in self._targets}
        replaced = [k for k in value if k in self._targets and k not in self._sources]
        for target, source in self.column_map.items():
            if source in value:
                kept[target] = value[source]
        self._seen_sources.update(self._sources & value.keys())
        return kept, replaced

    def _mapping_issues(self, original: Mapping[str, Any], issues: list[Issue]) -> list[Issue]:
        """Name the file's own fields in a mapped row's issues, and say which mapped fields the row lacks."""
        named = [self._named_in_file(issue) for issue in issues]
        absent = [(t, s) for t, s in self.column_map.items() if s not in original]
        self._reported_sources.update(s for _, s in absent)
        # The missing mapped field is the cause of what follows, so it comes first.
        return [
            Issue(
                "mapped field missing from the row",
                field=source,
                expected=f"a field `{source}` (read as `{target}` by the column mapping {target}={source})",
                found="fields " + ", ".join(sorted(original)),
            )
            for target, source in absent
        ] + named

    def _named_in_file(self, issue: Issue) -> Issue:
        """`label` becomes `category (mapped to label)`: the user looks for the file's field name."""
        if issue.field is None:
            return issue
        for target, source in self.column_map.items():
            if issue.field == target or issue.field.startswith((target + ".", target + "[")):
                return replace(issue, field=f"{source}{issue.field[len(target):]} (mapped to {target})")
        return issue

    def missing_sources(self) -> list[Issue]:
        """After the pass: a mapped field found in no row, unless a row's issues already named it."""
        return [
            Issue(
                "mapped field found in no row",
                file=self.file,
                field=source,
                expected=f"a field `{source}` in the rows (read as `{target}` by the column mapping "
                f"{target}={source})",
                found="absent from every row",
            )
            for target, source in self.column_map.items()
            if source not in self._seen_sources and source not in self._reported_sources
        ]

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
        if self.column_map:
            original = value
            if record.tabular and not self._header_checked:
                # Every CSV row has the header's columns: a mapped column it lacks fails the file once.
                absent = [(t, s) for t, s in self.column_map.items() if s not in value]
                if absent:
                    self._header_checked = True
                    self._reported_sources.update(s for _, s in absent)
                    return self._located(
                        record,
                        [
                            Issue(
                                "mapped column missing from the CSV header",
                                field=", ".join(s for _, s in absent),
                                expected="columns "
                                + ", ".join(s for _, s in absent)
                                + " (named by the column mapping "
                                + ", ".join(f"{t}={s}" for t, s in absent)
                                + ")",
                                found="columns " + ", ".join(sorted(value)),
                            )
                        ],
                        fatal=True,
                        line=1,
                    )
            value, replaced = self._mapped(value)
            self.ignored.update(replaced)
            verdict = self._check_value(record, value)
            if verdict.row is None and not verdict.fatal:
                return self._located(record, self._mapping_issues(original, list(verdict.issues)))
            return verdict
        return self._check_value(record, value)

    def _check_value(self, record: SourceRecord, value: dict[str, Any]) -> CheckedRow:
        """Check one record's (mapped) object against the file's format."""
        refused = _refusal_issue(value)
        if refused is not None:
            # The whole file is of that kind: one message, and no row of it is used.
            return self._located(record, [refused], fatal=True)
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
                            "row matches no known format" + _nested_rows_hint(value),
                            expected=_EXPECTED_SHAPES,
                            found="fields " + ", ".join(sorted(value)),
                        )
                    ],
                )
            self.source_format = detected
        fmt = self.source_format
        mixed = self._mixed_format_issue(value, detected, fmt)
        if mixed is not None:
            return self._located(record, [mixed])
        # An ignored field is named as the file names it.
        self.ignored.update(
            self._source_of.get(name, name) for name in ignored_fields(value, fmt, self.label_column)
        )
        row, issues = normalise(value, fmt, tabular=record.tabular, label_column=self.label_column)
        if row is not None and self._schema_validator is not None and fmt == "extraction":
            issues = self._schema_issues(row)
            if issues:
                row = None
        if row is None:
            return self._located(record, issues)
        return self._accept(record, value, fmt, row)

    def _mixed_format_issue(self, value: dict[str, Any], detected: str | None, fmt: str) -> Issue | None:
        """The issue of a row of another format than the file's `fmt`; None when `fmt` judges it."""
        signature = self.signature(fmt)
        # A row with every field of the file's format is judged by that format, even when another
        # format made of fewer of those fields claims it (a KTO row whose label is 1 rather than true).
        judged_by_values = signature <= value.keys() and detected is not None and SIGNATURE_OF[detected] < signature
        if (
            detected is not None
            and detected != fmt
            and not judged_by_values
            and (signature <= value.keys() or not signature & value.keys())
        ):
            origin = "given" if self.explicit else "detected from the first rows"
            return Issue(
                "row of another format mixed in",
                field="format",
                expected=f"{fmt} ({origin}) with fields {', '.join(sorted(signature))}",
                found=f"{detected} with fields {', '.join(sorted(value))}",
            )
        return None

    def _schema_issues(self, row: dict[str, Any]) -> list[Issue]:
        """Where an extraction row's output breaks the file's JSON Schema (empty when it matches)."""
        assert self._schema_validator is not None  # only called with a schema
        return [
            Issue(
                "output does not match the JSON Schema",
                field="output" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in e.path),
                expected=f"{e.validator} {json.dumps(e.validator_value, default=str)[:60]}",
                found=e.message[:120],
            )
            for e in self._schema_validator.iter_errors(row["output"])
        ]

    def _accept(self, record: SourceRecord, value: dict[str, Any], fmt: str, row: dict[str, Any]) -> CheckedRow:
        """A normalised row, unless its kind differs from the file's first row or its preference form is
        mixed; counted, with its label-like ignored fields."""
        row_kind = "chat" if "messages" in row else KIND_OF_FORMAT[fmt]
        if self._row_kind is None:
            self._row_kind = row_kind
        elif row_kind != self._row_kind:
            return self._located(record, [self._kind_mismatch(row_kind)])
        form_issue = self._preference_form(row)
        if form_issue is not None:
            return self._located(record, [form_issue])
        self._valid_rows += 1
        self._label_like.update(
            name for name in ignored_fields(value, fmt, self.label_column) if _label_like(value.get(name))
        )
        return CheckedRow(record.line, row, source=record.source)

    def _kind_mismatch(self, row_kind: str) -> Issue:
        """A file's rows must all make one kind of canonical row; say which field decides it."""
        return Issue(
            "prompt/completion rows of two shapes in one file",
            field="prompt",
            expected=f"every row like the first valid one ({self._row_kind} rows): prompt and completion "
            "both text, or both lists of messages",
            found=f"a row making a {row_kind} row",
        )

    def _preference_form(self, row: Mapping[str, Any]) -> Issue | None:
        """Preference rows of one file share one form, as trainers read the form off the first row."""
        if not is_preference_row(row):
            return None
        form = "conversational" if isinstance(row["prompt"], list) else "standard"
        if self._preference_form_seen is None:
            self._preference_form_seen = form
            return None
        if form == self._preference_form_seen:
            return None
        return Issue(
            "standard and conversational preference rows in one file",
            field="prompt",
            expected=f"every row {self._preference_form_seen} like the first valid one (text fields, or lists "
            "of messages)",
            found=f"a {form} row",
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
    column_map: Mapping[str, str] | None = None,
) -> tuple[RowChecker, Iterator[CheckedRow]]:
    """Open `path` for one streaming pass: the checker (format known after the first rows) and its rows.

    Stops after a fatal issue, since nothing after it can be trusted. A missing
    file, unknown file type or bad schema raises DataError here, before the pass.
    `path` may be a folder or glob pattern of shards; `text_split` is how a
    plain-text file divides into documents ("line" or "block"). `column_map` renames
    fields (target -> source) before each row is read; a mapped field found in no row ends
    the pass with a fatal issue.
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
    checker = RowChecker(str(path), source_format, schema, label_column, column_map)

    def rows() -> Iterator[CheckedRow]:
        records = iter_records(
            path, kind_of_file, max_row_bytes=max_row_bytes, on_progress=on_progress, text_split=text_split
        )
        for record in records:
            checked = checker.check(record)
            yield checked
            if checked.fatal:
                return
        missing = checker.missing_sources()
        if missing:
            yield CheckedRow(0, None, tuple(missing), fatal=True)

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
    column_map: dict[str, str] = field(default_factory=dict)

    def note_checker(self, checker: RowChecker) -> None:
        """Take the format, kind, ignored fields, hints and column mapping the checker settled on."""
        self.source_format, self.kind = checker.source_format, checker.kind
        self.ignored_fields = dict(checker.ignored.most_common())
        self.hints = checker.hints()
        self.column_map = dict(checker.column_map)

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
            "column_map": self.column_map,
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
    column_map: Mapping[str, str] | None = None,
) -> ValidationReport:
    """Validate `path` in one streaming pass, holding one row at a time, never the whole file.

    Returns a report rather than raising for bad rows, so a caller can show
    every issue; call `report.error()` to raise. A missing file or unknown
    format still raises DataError at once. `label_column` names a classification
    label field other than `label` (and implies the classification format);
    `column_map` renames fields (target -> source) before the rows are read.
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
        column_map=column_map,
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
