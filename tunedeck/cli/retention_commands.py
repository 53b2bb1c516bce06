"""`tunedeck retention plan | sweep`: what owners' retention policies delete now, and deleting it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, open_artifact_store, open_job_store

if TYPE_CHECKING:
    from tunedeck.service.privacy.retention_plan import RetentionAction
    from tunedeck.store.store import JobStore

app = typer.Typer(help="Owners' retention policies: see what the next sweep deletes, or run it.", no_args_is_help=True)
console = Console()
NOW_HELP = "Plan as of this time (ISO 8601, e.g. 2027-01-04T00:00:00Z; a time without a zone is UTC). Default: now."


def parse_now(now: str | None) -> datetime:
    """`--now` as an aware time; a clear error for text that is not one."""
    if now is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(now)
    except ValueError:
        message = f"{now!r} is not an ISO 8601 time (e.g. 2027-01-04T00:00:00Z)"
        raise typer.BadParameter(message, param_hint="--now") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _plan(store: JobStore, when: datetime, user: str | None) -> list[RetentionAction]:
    from tunedeck.core.errors import NotFoundError
    from tunedeck.core.settings import Settings
    from tunedeck.service.privacy.retention_plan import plan_retention
    from tunedeck.store.retention import RetentionBounds

    owner_id = None
    if user is not None:
        try:
            owner_id = store.users.get_user_by_name(user).id
        except NotFoundError:
            owner_id = store.users.get_user(user).id  # an id works too; NotFoundError names it
    bounds = RetentionBounds.from_settings(Settings())  # type: ignore[call-arg]  # from TUNEDECK_* variables
    return plan_retention(store, now=when, bounds=bounds, owner_id=owner_id)


def _table(actions: list[RetentionAction]) -> Table:
    table = Table("due", "what", "owner", "target", "removes", "policy")
    kinds = {"purge_raw_data": "raw data", "prune_checkpoints": "checkpoints", "delete_job": "whole job"}
    for action in actions:
        removes = (
            f"steps {', '.join(str(step) for step in action.checkpoint_steps)}"
            if action.checkpoint_steps
            else "\n".join(action.prefixes)
        )
        table.add_row(
            action.due_at.isoformat(timespec="seconds"), kinds[action.kind], action.owner_id,
            escape(action.label), escape(removes), f"{action.policy.level}: {action.policy.days} days",
        )  # fmt: skip
    return table


@app.command("plan")
def plan(
    now: str | None = typer.Option(None, "--now", help=NOW_HELP),
    user: str | None = typer.Option(None, "--user", help="Only this user's things (a name or an id)."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """What the next retention sweep would delete, and why; removes nothing."""
    when = parse_now(now)
    with reported_errors(), open_job_store(database_url) as store:
        actions = _plan(store, when, user)
    if not actions:
        console.print(f"nothing is due for deletion at {when.isoformat(timespec='seconds')}", highlight=False)
        return
    console.print(_table(actions))


@app.command("sweep")
def sweep(
    now: str | None = typer.Option(None, "--now", help=NOW_HELP),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Delete everything owners' retention policies make due, and print what was removed."""
    from tunedeck.service.privacy.retention_sweep import apply_retention

    when = parse_now(now)
    with reported_errors(), open_job_store(database_url) as store:
        actions = _plan(store, when, None)
        records = apply_retention(store, open_artifact_store(), actions, now=when)
    if not records:
        console.print("nothing was due for deletion", highlight=False)
        return
    table = Table("where", "what", "count")
    for record in records:
        table.add_row(record["where"], escape(record["what"]), str(record["count"]))
    console.print(table)
