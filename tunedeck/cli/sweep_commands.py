"""`tunedeck sweep`: remove (or, with --dry-run, list) this machine's leftover folders and uploads now.

The same two sweeps the worker and the server run on their own: finished jobs' run
folders and stale work scratch folders under the runs folder, and abandoned uploads.
Run here, no job or item counts as this process's own: running ones are told apart by
the database.
"""

from __future__ import annotations

from datetime import UTC, datetime

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, open_job_store
from tunedeck.core.settings import Settings

console = Console()


def sweep(
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be removed; remove nothing."),
    keep_run_hours: float | None = typer.Option(
        None,
        "--keep-run-hours",
        min=0,
        help="Hours a finished job's run folder stays [default: TUNEDECK_KEEP_RUN_FOLDERS_HOURS].",
    ),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Remove finished jobs' run folders, stale work scratch folders and abandoned uploads on this machine."""
    from tunedeck.worker.sweeper import WorkerFolders, sweep_upload_leftovers, sweep_worker_folders

    with reported_errors():
        settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
        hours = settings.keep_run_folders_hours if keep_run_hours is None else keep_run_hours
        now = datetime.now(UTC)
        with open_job_store(database_url) as store:
            report = sweep_worker_folders(
                WorkerFolders(settings.resolved_runs_dir(), store), now=now, keep_run_hours=hours, dry_run=dry_run
            )
        report.extend(sweep_upload_leftovers(settings.resolved_uploads_dir(), now=now, dry_run=dry_run))
    if report.removed:
        table = Table("where", "path", "bytes")
        for item in report.removed:
            table.add_row(item["where"], escape(str(item["what"])), str(item["bytes"]))
        console.print(table)
    verb = "Would remove" if dry_run else "Removed"
    console.print(f"{verb} {len(report.removed)} leftover(s), {report.total_bytes} bytes.", highlight=False)
    for error in report.errors:
        console.print(f"[red]could not remove:[/red] {escape(error)}", highlight=False, soft_wrap=True)
    if report.errors:
        raise typer.Exit(1)
