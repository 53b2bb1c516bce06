"""`tunedeck backup create | restore`: one encrypted file holding an installation, and putting it back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeRemainingColumn
from rich.table import Table

from tunedeck.cli.errors import reported_errors

if TYPE_CHECKING:
    from tunedeck.backup.contents import BackupProgress

app = typer.Typer(
    help="Back up the database and artifact store into one encrypted file; restore it onto an empty installation.",
    no_args_is_help=True,
)
console = Console()
err_console = Console(stderr=True)

_STAGES = {
    "database": "database rows",
    "manifests": "manifests",
    "artifacts": "artifacts",
    "encryption": "encryption",
    "verification": "prefixes verified",
}


@app.command("create")
def create(
    out: Path = typer.Option(..., "--out", help="The backup file to write (must not exist yet)."),
    with_artifacts: bool = typer.Option(
        False, "--with-artifacts", help="Include every stored object (datasets, checkpoints, models, exports)."
    ),
    unencrypted: bool = typer.Option(
        False, "--unencrypted", help="Write a plain tar, readable by anyone who has the file."
    ),
) -> None:
    """Back up the configured installation (TUNEDECK_DATABASE_URL, TUNEDECK_STORAGE_URL) into one file."""
    from tunedeck.backup.contents import BackupError, summary_counts
    from tunedeck.backup.create import create_backup
    from tunedeck.backup.sealing import KEY_SETTING
    from tunedeck.core.settings import Settings
    from tunedeck.storage.encryption import Keyring

    with reported_errors():
        settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
        keyring = None if unencrypted else Keyring.from_settings(settings)
        if keyring is None and not unencrypted:
            raise BackupError(
                f"no encryption key is configured: set {KEY_SETTING}, or pass --unencrypted for a plain backup"
            )
        with _progress_bars() as on_progress:
            report = create_backup(
                settings, out, with_artifacts=with_artifacts, keyring=keyring, on_progress=on_progress
            )
    table = _summary(summary_counts(report.rows))
    table.add_row("committed prefixes", str(report.prefixes))
    if report.with_artifacts:
        table.add_row("artifact files", str(report.artifact_files))
        table.add_row("artifact bytes", str(report.artifact_bytes))
    table.add_row("backup size (bytes)", str(report.size_bytes))
    console.print(table)
    sealed = "encrypted" if report.encrypted else "[yellow]not encrypted[/yellow]"
    console.print(f"wrote {report.path} ({sealed}, schema revision {report.alembic_revision})", highlight=False)


@app.command("restore")
def restore(
    source: Path = typer.Argument(..., help="A backup file written by `tunedeck backup create`."),
    allow_unencrypted: bool = typer.Option(
        False,
        "--allow-unencrypted",
        help="Restore an unencrypted backup although an encryption key is configured (only one you made and kept).",
    ),
) -> None:
    """Restore a backup onto the configured installation, which must be empty; checks every committed prefix.

    Before writing anything it prints who the restore lets in: the users, the admins and the API tokens.
    """
    from tunedeck.backup.contents import summary_counts
    from tunedeck.backup.restore import restore_backup
    from tunedeck.core.settings import Settings
    from tunedeck.storage.encryption import Keyring

    with reported_errors():
        settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
        keyring = Keyring.from_settings(settings)
        with _progress_bars() as on_progress:
            report = restore_backup(
                settings,
                source,
                keyring=keyring,
                on_progress=on_progress,
                on_plan=lambda plan: console.print(f"this restore {escape(plan.describe())}", highlight=False),
                allow_unencrypted=allow_unencrypted,
            )
    table = _summary(summary_counts(report.rows))
    table.add_row("prefixes verified", str(report.prefixes_verified))
    table.add_row("files verified", str(report.files_verified))
    table.add_row("bytes verified", str(report.bytes_verified))
    console.print(table)
    console.print(f"restored {source} (schema revision {report.alembic_revision})", highlight=False)
    if report.missing_prefixes:
        err_console.print(
            f"[yellow]the store lacks {len(report.missing_prefixes)} committed prefixes, or holds them damaged "
            "(the backup has no artifacts to put back):[/yellow]",
            highlight=False,
        )
        for prefix in report.missing_prefixes:
            err_console.print(f"  {prefix}", markup=False, highlight=False)
        raise typer.Exit(1)


def _summary(counts: dict[str, int]) -> Table:
    table = Table("what", "count")
    for label, count in counts.items():
        table.add_row(label, str(count))
    return table


@contextmanager
def _progress_bars() -> Iterator[BackupProgress]:
    """A progress callback drawing one bar per stage on stderr."""
    columns = (TextColumn("{task.description:<18}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=False) as progress:
        tasks: dict[str, TaskID] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(_STAGES.get(stage, stage), total=total or 1)
            # Nothing to do is done: a bar with no total would otherwise stay at 0%.
            progress.update(tasks[stage], completed=done if total else 1, total=total or 1)

        yield update
