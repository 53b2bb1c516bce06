"""`tunedeck deletions list | show`: deletion receipts, read from the database on the server."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, open_job_store

if TYPE_CHECKING:
    from tunedeck.store.models import DeletionReceipt

app = typer.Typer(help="Deletion receipts: what deleting an object removed, and where.", no_args_is_help=True)
console = Console()


def print_receipt(receipt: DeletionReceipt) -> None:
    """A receipt as a heading and a table of its removals."""
    finished = f", finished {receipt.finished_at.isoformat(timespec='seconds')}" if receipt.finished_at else ""
    target = f"{receipt.target_kind} {escape(receipt.target_label)} ({escape(receipt.target_id)})"
    asked = receipt.requested_at.isoformat(timespec="seconds")
    console.print(
        f"[bold]{receipt.id}[/bold] {target}: {receipt.state}, {receipt.reason}, asked {asked}{finished}",
        highlight=False,
    )
    table = Table("where", "what", "count", "bytes")
    for line in receipt.removed or []:
        table.add_row(str(line["where"]), str(line["what"]), str(line["count"]), str(line["bytes"]))
    console.print(table)


@app.command("list")
def list_deletions(
    user: str = typer.Option(..., "--user", help="Name of the user who asked for the deletions."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """List the deletions a user asked for, newest first."""
    with reported_errors(), open_job_store(database_url) as store:
        receipts = store.deletions.list_receipts(store.users.get_user_by_name(user))
    table = Table("target", "state", "reason", "asked", "removals")
    table.add_column("id", no_wrap=True)  # last and whole: it is what `show` takes
    for receipt in receipts:
        table.add_row(
            f"{receipt.target_kind} {receipt.target_label}", receipt.state, receipt.reason,
            receipt.requested_at.isoformat(timespec="seconds"), str(len(receipt.removed or [])), receipt.id,
        )  # fmt: skip
    console.print(table)


@app.command("show")
def show(
    deletion_id: str = typer.Argument(..., help="The receipt's id (del_...)."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Show one receipt: every removal, where, how many files or rows and how many bytes."""
    with reported_errors(), open_job_store(database_url) as store:
        receipt = store.deletions.receipt(deletion_id)
    print_receipt(receipt)
