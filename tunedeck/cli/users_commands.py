"""`tunedeck users create | token | list | disable | tokens | revoke`: accounts and API tokens."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, open_job_store

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
