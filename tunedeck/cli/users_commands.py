"""`tunedeck users create | token | list | disable | delete | tokens | revoke | quota`: accounts, API tokens, quotas."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, open_job_store

if TYPE_CHECKING:
    from tunedeck.store.quotas import StorageMeter

app = typer.Typer(help="Create, list and disable users; issue, list and revoke API tokens.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)

@app.command("create")
def create(
    name: str = typer.Argument(..., help="User name (letters, digits, _ . @ -)."),
    admin: bool = typer.Option(False, "--admin", help="Give the user the admin role (sees every user's objects)."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Create a user."""
    with reported_errors(), open_job_store(database_url) as store:
        user = store.users.create_user(name, admin=admin)
    console.print(f"created {user.role} [bold]{user.name}[/bold] ({user.id})", highlight=False)


@app.command("token")
def token(
    name: str = typer.Argument(..., help="User name."),
    label: str = typer.Option("cli", "--label", help="A name for the token, to tell tokens apart."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Issue an API token for a user and print it once (only its hash is stored)."""
    with reported_errors(), open_job_store(database_url) as store:
        user = store.users.get_user_by_name(name)
        plain, _row = store.users.issue_token(user, name=label)
    err_console.print("Store this token now: it will not be shown again.")
    typer.echo(plain)


@app.command("list")
def list_users(database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP)) -> None:
    """List users and their roles."""
    with reported_errors(), open_job_store(database_url) as store:
        users = store.users.list_users()
    table = Table("name", "role", "state", "id", "created")
    for user in users:
        state = "disabled" if user.disabled_at is not None else "active"
        table.add_row(user.name, user.role, state, user.id, user.created_at.isoformat(timespec="seconds"))
    console.print(table)


@app.command("disable")
def disable(
    name: str = typer.Argument(..., help="User name."),
    enable: bool = typer.Option(False, "--enable", help="Enable the user again instead."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Disable a user: their tokens and dashboard sessions stop working at once (their objects stay)."""
    with reported_errors(), open_job_store(database_url) as store:
        user = store.users.set_disabled(name, not enable)
    console.print(f"user [bold]{user.name}[/bold] is {'active' if enable else 'disabled'}", highlight=False)


@app.command("delete")
def delete(
    name: str = typer.Argument(..., help="User name."),
    by: str = typer.Option(..., "--by", help="Name of the admin asking (the receipt is theirs)."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Delete a user and everything theirs: rows now, then a worker removes their files and copies."""
    from tunedeck.cli.deletions_commands import print_receipt
    from tunedeck.service.privacy.deletion_plan import request_deletion

    with reported_errors(), open_job_store(database_url) as store:
        admin = store.users.get_user_by_name(by)
        receipt = request_deletion(store, admin, "user", store.users.get_user_by_name(name).id)
    print_receipt(receipt)
    err_console.print("A worker removes the stored files and local copies; `tunedeck deletions show` follows it.")


@app.command("tokens")
def tokens(
    name: str = typer.Argument(..., help="User name."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """List a user's API tokens: id, name, created and last used (the secrets are never stored)."""
    with reported_errors(), open_job_store(database_url) as store:
        rows = store.users.list_tokens(store.users.get_user_by_name(name))
    table = Table("name", "created", "last used")
    table.add_column("id", no_wrap=True)  # an id is copied whole into `tunedeck users revoke`
    for row in rows:
        used = row.last_used_at.isoformat(timespec="seconds") if row.last_used_at else "never"
        table.add_row(row.name, row.created_at.isoformat(timespec="seconds"), used, row.id)
    console.print(table)


@app.command("revoke")
def revoke(
    name: str = typer.Argument(..., help="User name."),
    token_id: str = typer.Argument(..., help="The token's id (tok_…), from `tunedeck users tokens NAME`."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Revoke one of a user's tokens: it stops working at once, with the dashboard sessions opened with it."""
    with reported_errors(), open_job_store(database_url) as store:
        store.users.revoke_token(store.users.get_user_by_name(name), token_id)
    console.print(f"token {token_id} of [bold]{name}[/bold] revoked", highlight=False)


@app.command("quota")
def quota(
    name: str | None = typer.Argument(None, help="User name; leave out with --everyone."),
    everyone: bool = typer.Option(False, "--everyone", help="The limits every user has unless set for them."),
    running_jobs: int | None = typer.Option(None, "--running-jobs", min=0, help="Jobs running at once."),
    queued_jobs: int | None = typer.Option(None, "--queued-jobs", min=0, help="Jobs waiting in the queue at once."),
    storage_gb: float | None = typer.Option(
        None, "--storage-gb", min=0, help="Gigabytes (10^9 bytes) kept in storage: datasets, checkpoints, exports."
    ),
    device_hours: float | None = typer.Option(
        None, "--device-hours", min=0, help="Device-hours per period (a job on CPU counts as one device)."
    ),
    period_days: int | None = typer.Option(None, "--period-days", min=1, help="The device-hours period (default 30)."),
    clear: list[str] = typer.Option(
        [], "--clear", help="Remove a limit (running_jobs, queued_jobs, storage_bytes, device_hours, period_days)."
    ),
    by: str | None = typer.Option(None, "--by", help="The admin user a change is recorded under (needed to change)."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Show or set quotas: for one user (their use too), or for everyone with --everyone."""
    from tunedeck.core.errors import Issue, IssueListError
    from tunedeck.store.quotas import EVERYONE, LIMIT_FIELDS

    given = {
        "running_jobs": running_jobs,
        "queued_jobs": queued_jobs,
        "storage_bytes": None if storage_gb is None else round(storage_gb * 1e9),
        "device_hours": device_hours,
        "period_days": period_days,
    }
    changes: dict[str, object] = {key: value for key, value in given.items() if value is not None}
    with reported_errors(), open_job_store(database_url) as store:
        issues = [
            Issue("unknown limit", field="--clear", expected=" | ".join(LIMIT_FIELDS), found=field)
            for field in clear
            if field not in LIMIT_FIELDS
        ]
        if everyone == (name is not None):
            issues.append(Issue("name a user or pass --everyone (one of the two)", field="NAME"))
        if (changes or clear) and by is None:
            issues.append(Issue("a change is recorded under an admin", field="--by", expected="an admin's user name"))
        if issues:
            raise IssueListError(issues, title="invalid options")
        changes.update({field: None for field in clear})
        subject = EVERYONE if name is None else store.users.get_user_by_name(name).id
        if changes:
            admin = store.users.get_user_by_name(str(by))
            if not admin.is_admin:
                raise IssueListError([Issue("not an admin", field="--by", found=admin.name)], title="invalid options")
            store.quotas.set(subject, changes, by=admin.id)
        settings = store.quotas.settings(subject)
        limits = store.quotas.limits_for(subject) if name is not None else None
        use = store.quotas.usage(subject, meter=_storage_meter()) if name is not None else None
    table = Table("limit", "set here", "applies" if name else "", "in use" if name else "")
    for field in LIMIT_FIELDS:
        own = getattr(settings, field)
        applied = "" if limits is None else _shown(getattr(limits, field))
        used = "" if use is None or field == "period_days" else _shown(getattr(use, field))
        table.add_row(field, _shown(own), applied, used)
    console.print(f"quotas of [bold]{name or 'everyone'}[/bold]", highlight=False)
    console.print(table)


def _shown(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _storage_meter() -> StorageMeter:
    """Measures a user's stored bytes in the configured artifact storage."""
    from tunedeck.core.settings import Settings
    from tunedeck.storage.base import stored_bytes_of_user
    from tunedeck.storage.factory import open_store_from_settings

    settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
    store = open_store_from_settings(settings)
    return partial(stored_bytes_of_user, store)
