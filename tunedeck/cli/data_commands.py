"""`tunedeck data validate | split | dedup | scan | register`.

Every command takes `--json` for machine-readable output and exits non-zero on
invalid data with every issue printed. Other data commands register on `app`
and can reuse `file_progress`, `emit_json` and `fail`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from tunedeck.cli.errors import print_error
from tunedeck.core.column_map import ColumnMapError, format_column_map, parse_column_map
from tunedeck.core.dataset_rights import (
    LICENCE_HELP,
    RIGHTS_NOTE_HELP,
    check_licence,
    check_rights_note,
    describe_dataset_licence,
)
from tunedeck.core.dataset_vocabulary import SOURCE_FORMATS
from tunedeck.core.errors import DataError, HubDatasetError, Issue, IssueListError, TunedeckError

if TYPE_CHECKING:
    from tunedeck.data.loading import LoadedDataset
    from tunedeck.data.registry import DatasetVersion

app = typer.Typer(help="Validate, split, deduplicate, scan and register datasets.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

PROGRESS_MIN_BYTES = 8 * 1024 * 1024
"""Files smaller than this validate in about a second: no progress bar for them."""
PROGRESS_MIN_ROWS = 20_000
"""Scanning fewer rows than this takes a few seconds: no progress bar for them."""

FORMAT_HELP = f"Row format: auto, {', '.join(SOURCE_FORMATS)}."
FILE_TYPE_HELP = "File type, overriding the extension: jsonl, json, csv, tsv, text, parquet."
TEXT_SPLIT_HELP = "Documents of a .txt file: line (one per line) or block (one per blank-line-separated block)."
DATASET_HELP = (
    "Dataset file (JSONL, JSON array, CSV, TSV, text, Parquet; also .gz), a folder of shards, "
    "or a quoted pattern such as 'data/train-*.jsonl'."
)
LABEL_COLUMN_HELP = (
    "Field holding the class label of a classification dataset, when it is not `label` "
    "(implies --format classification)."
)

MAP_HELP = (
    "Rename the file's fields before its rows are read: target=source pairs, comma-separated, "
    "e.g. instruction=question,output=answer or text=sentence,label=category."
)


def check_map(value: str | None) -> str | None:
    """Typer callback of `--map`: a malformed mapping is a usage error naming the option."""
    if value is not None:
        try:
            parse_column_map(value)
        except ColumnMapError as error:
            raise typer.BadParameter(str(error), param_hint="'--map'") from None
    return value


def column_map(value: str | None) -> dict[str, str] | None:
    """The parsed `--map` (already checked by `check_map`), or None without one."""
    return parse_column_map(value) if value is not None else None


def map_option() -> Any:
    """The `--map` option, the same on every command that reads a dataset file."""
    return typer.Option(None, "--map", help=MAP_HELP, callback=check_map, metavar="TARGET=SOURCE,...")


def emit_json(data: Any) -> None:
    """Print `data` as JSON on stdout, and nothing else there."""
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def fail(error: TunedeckError, as_json: bool) -> typer.Exit:
    """Report `error` (every issue, as JSON on stdout or as text on stderr) and return the Exit to raise."""
    if as_json:
        issues = error.issues if isinstance(error, IssueListError) else []
        emit_json({"ok": False, "error": str(error).splitlines()[0], "issues": [i.to_dict() for i in issues]})
    else:
        print_error(error)
    return typer.Exit(1)


@contextmanager
def file_progress(path: Path, label: str, enabled: bool = True) -> Iterator[Callable[[int], None] | None]:
    """A callback advancing a progress bar on stderr by bytes read, for files large enough to wait on."""
    size = path.stat().st_size if path.is_file() else 0
    if not enabled or size < PROGRESS_MIN_BYTES:
        yield None
        return
    columns = (TextColumn(label), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=True) as progress:
        task = progress.add_task(label, total=size)
        yield lambda done: progress.update(task, completed=done)


@contextmanager
def row_progress(total: int, label: str, enabled: bool = True) -> Iterator[Callable[[int], None] | None]:
    """A callback advancing a progress bar on stderr by rows done, for row counts large enough to wait on."""
    if not enabled or total < PROGRESS_MIN_ROWS:
        yield None
        return
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda done: progress.update(task, completed=done)


def print_ignored(target: Console, ignored: dict[str, int], hints: list[str]) -> None:
    """Name every top-level field the format ignored, with its row count, and any hint about it."""
    from tunedeck.data.validation import ignored_summary

    if ignored:
        target.print(f"ignored fields: {ignored_summary(ignored)}", markup=False, highlight=False, soft_wrap=True)
    for hint in hints:
        target.print(f"  {hint}", markup=False, highlight=False, soft_wrap=True)


def print_mapping(target: Console, mapping: dict[str, str]) -> None:
    """Say how the file's fields were renamed, when they were: the version records it."""
    if mapping:
        target.print(f"column mapping: {format_column_map(mapping)}", markup=False, highlight=False, soft_wrap=True)


def _print_issues(report_issues: list[Any], total: int) -> None:
    for issue in report_issues:
        err_console.print(f"  - {issue.render()}", markup=False, highlight=False, soft_wrap=True)
    if total > len(report_issues):
        err_console.print(f"  ... and {total - len(report_issues)} more", markup=False)


@app.command("validate")
def validate(
    file: Path = typer.Argument(..., help=DATASET_HELP),
    format: str = typer.Option("auto", "--format", "-f", help=FORMAT_HELP),
    file_type: str | None = typer.Option(None, "--file-type", help=FILE_TYPE_HELP),
    text_split: str = typer.Option("line", "--text-split", help=TEXT_SPLIT_HELP),
    schema: Path | None = typer.Option(None, "--schema", help="JSON Schema for extraction outputs."),
    label_column: str | None = typer.Option(None, "--label-column", help=LABEL_COLUMN_HELP),
    mapping: str | None = map_option(),
    max_issues: int = typer.Option(100, "--max-issues", min=1, help="Issues listed at most."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Check every row of FILE, streaming; exit 1 listing every issue when any row is invalid."""
    from tunedeck.data.validation import validate_file

    try:
        with file_progress(file, "validating", not as_json) as progress:
            report = validate_file(
                file,
                format,
                file_type=file_type,
                schema_path=schema,
                max_issues=max_issues,
                on_progress=progress,
                text_split=text_split,
                label_column=label_column,
                column_map=column_map(mapping),
            )
    except TunedeckError as error:
        raise fail(error, as_json) from None
    if as_json:
        emit_json(report.to_dict())
    elif report.ok:
        console.print(
            f"[green]valid[/green]: {file}: {report.rows_valid} rows, format {report.source_format} "
            f"(kind {report.kind}), sha256 {report.sha256}",
            highlight=False,
            soft_wrap=True,
        )
        print_mapping(console, report.column_map)
        print_ignored(console, report.ignored_fields, report.hints)
    else:
        # A refusal of the whole file (a preference file, a bad CSV header) counts no rows.
        counts = f"{report.rows_invalid} of {report.rows_total} rows invalid" if report.rows_total else "file refused"
        err_console.print(
            f"[red]invalid[/red]: {file}: {report.issue_count} issue(s), {counts}",
            highlight=False,
            soft_wrap=True,
        )
        _print_issues(report.issues, report.issue_count)
        print_ignored(err_console, report.ignored_fields, report.hints)
    if not report.ok:
        raise typer.Exit(1)


@app.command("register")
def register(
    file: Path = typer.Argument(..., help=DATASET_HELP),
    name: str = typer.Option(..., "--name", help="Dataset name; versions number 1, 2, ... per name."),
    root: Path = typer.Option(..., "--root", help="Registry folder."),
    format: str = typer.Option("auto", "--format", "-f", help=FORMAT_HELP),
    file_type: str | None = typer.Option(None, "--file-type", help=FILE_TYPE_HELP),
    text_split: str = typer.Option("line", "--text-split", help=TEXT_SPLIT_HELP),
    schema: Path | None = typer.Option(None, "--schema", help="JSON Schema for extraction outputs."),
    label_column: str | None = typer.Option(None, "--label-column", help=LABEL_COLUMN_HELP),
    mapping: str | None = map_option(),
    drop_invalid: bool = typer.Option(
        False, "--drop-invalid", help="Register the valid rows, listing the others."
    ),
    hub_split: str | None = typer.Option(None, "--split", help="Split of a hub:owner/name dataset, such as train."),
    subset: str | None = typer.Option(None, "--subset", help="Subset (config) of a hub:owner/name dataset."),
    revision: str | None = typer.Option(
        None, "--revision", help="Branch, tag or commit of a hub:owner/name dataset (default: main)."
    ),
    licence: str | None = typer.Option(None, "--licence", help=LICENCE_HELP),
    rights_note: str | None = typer.Option(None, "--rights-note", help=RIGHTS_NOTE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Validate FILE (or the split of hub:owner/name) and register it as an immutable version.

    An invalid file registers nothing. A hub dataset is pinned: the manifest records its
    id, split, subset, the revision asked for and the commit it resolved to. The licence and
    rights note, when given, are kept in the manifest's notes; model cards list them.
    """
    import shutil

    from tunedeck.core.settings import process_settings
    from tunedeck.data.hub import HubDatasetRef, default_resolver, fetch_split, is_hub_id, scratch_dir
    from tunedeck.data.loading import load_dataset
    from tunedeck.data.registry import DatasetRegistry

    hub = is_hub_id(str(file))
    if not hub and (hub_split, subset, revision) != (None, None, None):
        raise fail(HubDatasetError(f"{file}: --split, --subset and --revision apply to hub:owner/name datasets only"),
                   as_json)
    scratch: Path | None = None
    try:
        notes: dict[str, Any] | None = recorded_rights(licence, rights_note)
        if hub:
            if hub_split is None:
                raise HubDatasetError(f"{file}: --split is required for a hub dataset (expected a split such as train)")
            ref = HubDatasetRef.parse(str(file), hub_split, subset, revision)
            scratch = scratch_dir(root)
            fetched = fetch_split(ref, scratch, default_resolver(process_settings().dataset_mirror))
            file, notes = fetched.path, {**fetched.notes(), **(notes or {})}
        with file_progress(file, "reading", not as_json) as progress:
            loaded = load_dataset(
                file,
                format,
                drop_invalid=drop_invalid,
                schema_path=schema,
                name=name,
                file_type=file_type,
                on_progress=progress,
                text_split=text_split,
                label_column=label_column,
                column_map=column_map(mapping),
            )
        version = DatasetRegistry(root).register(loaded, name, notes=notes)
    except TunedeckError as error:
        raise fail(error, as_json) from None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    _print_registered(version, loaded, as_json)


def _print_registered(version: DatasetVersion, loaded: LoadedDataset, as_json: bool) -> None:
    """What `register` prints: the manifest as JSON, or the dropped rows, the version, mapping, ignored
    fields and licence."""
    if as_json:
        emit_json(
            {
                "ok": True,
                "manifest": version.manifest.to_dict(),
                "path": str(version.data_path),
                "dropped": [issue.to_dict() for issue in loaded.dropped],
                "ignored_fields": loaded.ignored_fields,
                "hints": loaded.hints,
            }
        )
        return
    if loaded.dropped:
        err_console.print(
            f"[yellow]dropped[/yellow] {loaded.manifest.dropped} invalid row(s):", highlight=False
        )
        _print_issues(loaded.dropped, len(loaded.dropped))
    m = version.manifest
    console.print(
        f"registered {m.name} v{m.version} ({m.id}): {m.rows} rows, {m.kind}, sha256 {m.sha256}",
        highlight=False,
        soft_wrap=True,
    )
    print_mapping(console, loaded.column_map)
    print_ignored(console, loaded.ignored_fields, loaded.hints)
    if m.notes.get("licence") or m.notes.get("rights_note"):
        console.print(f"licence: {describe_dataset_licence(m.notes.get('licence'))}", highlight=False, soft_wrap=True)


def recorded_rights(licence: str | None, rights_note: str | None) -> dict[str, str] | None:
    """The manifest notes recording `--licence` and `--rights-note` (None when neither is given).

    DataError naming the option when one is not acceptable text.
    """
    notes: dict[str, str] = {}
    for option, key, value, check in (
        ("--licence", "licence", licence, check_licence),
        ("--rights-note", "rights_note", rights_note, check_rights_note),
    ):
        try:
            checked = check(value)
        except ValueError as error:
            raise DataError([Issue(str(error), field=option, found=(value or "")[:100])]) from None
        if checked is not None:
            notes[key] = checked
    return notes or None


@app.command("split")
def split(
    file: Path = typer.Argument(..., help=DATASET_HELP),
    out: Path = typer.Option(..., "--out", help="Folder for train/validation/test.jsonl and the manifest."),
    ratios: str = typer.Option("0.8,0.1,0.1", "--ratios", help="train,validation,test ratios summing to 1."),
    seed: int = typer.Option(42, "--seed", help="Seed of the shuffle; the same seed gives the same split."),
    seal_test: bool = typer.Option(False, "--seal-test", help="Mark the test split sealed in its manifest."),
    threshold: float = typer.Option(
        0.8, "--threshold", help="Jaccard similarity from which two rows are near duplicates, kept in one split."
    ),
    format: str = typer.Option("auto", "--format", "-f", help=FORMAT_HELP),
    text_split: str = typer.Option("line", "--text-split", help=TEXT_SPLIT_HELP),
    label_column: str | None = typer.Option(None, "--label-column", help=LABEL_COLUMN_HELP),
    mapping: str | None = map_option(),
    drop_invalid: bool = typer.Option(
        False, "--drop-invalid", help="Split the valid rows, listing the others."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the split manifest as JSON."),
) -> None:
    """Split FILE deterministically into train/validation/test files with a manifest.

    Exact and near duplicates are grouped and each group is put in one split, so no
    evaluation row repeats a training row; the manifest reports the groups.
    """
    from tunedeck.data.loading import load_dataset
    from tunedeck.data.split import parse_ratios, split_dataset, write_split

    try:
        parsed = parse_ratios(ratios)
        with file_progress(file, "reading", not as_json) as progress:
            loaded = load_dataset(
                file, format, drop_invalid=drop_invalid, on_progress=progress, text_split=text_split,
                label_column=label_column,
                column_map=column_map(mapping),
            )
        manifest = write_split(split_dataset(loaded, parsed, seed, seal_test=seal_test, threshold=threshold), out)
    except TunedeckError as error:
        raise fail(error, as_json) from None
    if as_json:
        emit_json({"ok": True, **manifest})
        return
    table = Table("split", "rows", "sha256", "sealed")
    for name, part in manifest["splits"].items():
        table.add_row(name, str(part["rows"]), part["sha256"][:16], "yes" if part["sealed"] else "")
    console.print(table)
    dedup = manifest["dedup"]
    console.print(
        f"duplicates: {dedup['exact_pairs']} exact and {dedup['near_pairs']} near pair(s) grouped into "
        f"{dedup['clusters']} cluster(s) of {dedup['rows_in_clusters']} rows, each kept in one split; "
        f"{dedup['clusters_kept_together']} cluster(s) a row-by-row cut would have spread over two splits",
        highlight=False,
        soft_wrap=True,
    )
    console.print(f"written to {out}", highlight=False, soft_wrap=True)


def _label_files(files: list[Path]) -> dict[str, Path]:
    labels: dict[str, Path] = {}
    for path in files:
        label, n = path.stem, 2
        while label in labels or label == "train":
            label, n = f"{path.stem}-{n}", n + 1
        labels[label] = path
    return labels


@app.command("dedup")
def dedup(
    train: Path = typer.Argument(..., help="Training dataset file."),
    against: list[Path] = typer.Option([], "--against", help="Evaluation file(s) to check for overlap."),
    threshold: float = typer.Option(0.8, "--threshold", help="Jaccard similarity for near duplicates."),
    drop: bool = typer.Option(False, "--drop", help="Write train without duplicates to --out."),
    out: Path | None = typer.Option(None, "--out", help="Output file of --drop (canonical JSONL)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any duplicate or overlap is found."),
    format: str = typer.Option("auto", "--format", "-f", help=FORMAT_HELP),
    text_split: str = typer.Option("line", "--text-split", help=TEXT_SPLIT_HELP),
    label_column: str | None = typer.Option(None, "--label-column", help=LABEL_COLUMN_HELP),
    mapping: str | None = map_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Find exact and near duplicates within TRAIN and between TRAIN and each --against file."""
    from tunedeck.data.dedup import drop_from_train, find_duplicates
    from tunedeck.data.loading import load_dataset
    from tunedeck.data.manifest import write_canonical_jsonl

    try:
        if drop and out is None:
            raise DataError(
                [Issue("--drop needs an output file", field="out", expected="--out FILE", found="none")]
            )
        files = {"train": train, **_label_files(list(against))}
        splits = {}
        for label, path in files.items():
            with file_progress(path, f"reading {label}", not as_json) as progress:
                splits[label] = load_dataset(
                    path, format, on_progress=progress, text_split=text_split, label_column=label_column,
                    column_map=column_map(mapping),
                )
        total = sum(len(loaded.rows) for loaded in splits.values())
        with row_progress(total, "comparing", not as_json) as progress:
            report = find_duplicates(splits, threshold=threshold, on_progress=progress)
        if drop and out is not None:
            kept = drop_from_train(splits["train"], report)
            write_canonical_jsonl(out, kept.rows)
    except TunedeckError as error:
        raise fail(error, as_json) from None
    if as_json:
        emit_json({"ok": True, **report.to_dict(), **({"written": str(out)} if drop else {})})
    else:
        table = Table("match", "first", "second", "similarity", "contamination")
        for pair in report.pairs[:200]:
            table.add_row(
                pair.match,
                f"{pair.first_split}:{pair.first_row}",
                f"{pair.second_split}:{pair.second_row}",
                f"{pair.similarity:.2f}",
                "yes" if pair.contamination else "",
            )
        console.print(table)
        console.print(
            ", ".join(f"{k} {v}" for k, v in report.counts().items()), highlight=False, soft_wrap=True
        )
        if drop:
            console.print(
                f"written {len(splits['train'].rows) - len(report.train_drop)} rows to {out}", highlight=False
            )
    if strict and report.pairs:
        raise typer.Exit(1)


@app.command("scan")
def scan(
    file: Path = typer.Argument(..., help=DATASET_HELP),
    policy: str = typer.Option(
        "warn", "--policy", help="warn (report), block (exit 1), redact (new version)."
    ),
    root: Path | None = typer.Option(None, "--root", help="Registry folder for --policy redact."),
    name: str | None = typer.Option(None, "--name", help="Dataset name for the redacted version."),
    format: str = typer.Option("auto", "--format", "-f", help=FORMAT_HELP),
    text_split: str = typer.Option("line", "--text-split", help=TEXT_SPLIT_HELP),
    label_column: str | None = typer.Option(None, "--label-column", help=LABEL_COLUMN_HELP),
    mapping: str | None = map_option(),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Scan FILE for secrets and personal data; findings are always masked."""
    from tunedeck.data.loading import load_dataset
    from tunedeck.data.registry import DatasetRegistry
    from tunedeck.data.scan_policy import apply_scan_policy, scan_dataset

    try:
        loaded = load_dataset(
            file, format, name=name, text_split=text_split, label_column=label_column, column_map=column_map(mapping)
        )
        with row_progress(len(loaded.rows), "scanning", not as_json) as progress:
            report = scan_dataset(loaded, on_progress=progress)
        outcome = apply_scan_policy(
            loaded, report, policy, registry=DatasetRegistry(root) if root else None, name=name
        )
    except TunedeckError as error:
        raise fail(error, as_json) from None
    redacted = outcome.redacted.manifest.to_dict() if outcome.redacted else None
    if as_json:
        emit_json({"ok": True, "policy": policy, **report.to_dict(), "redacted": redacted})
        return
    table = Table("type", "count", "rows")
    for type_id, rows in report.rows_by_type().items():
        table.add_row(type_id, str(report.counts()[type_id]), ", ".join(map(str, rows[:20])))
    console.print(table if not report.clean else f"[green]clean[/green]: {file}")
    for finding in report.findings[:50]:
        console.print(
            f"  {file}:{finding.row}: {finding.field}: {finding.type}: {finding.excerpt}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if redacted:
        console.print(
            f"redacted version {redacted['name']} v{redacted['version']} ({redacted['id']})", highlight=False
        )
