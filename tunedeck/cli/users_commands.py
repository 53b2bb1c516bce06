"""`tunedeck users create NAME [--admin] | token NAME | list`: accounts and API tokens."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, open_job_store

app = typer.Typer(help="Create users and issue API tokens.", no_args_is_help=True)
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
    table = Table("name", "role", "id", "created")
    for user in users:
        table.add_row(user.name, user.role, user.id, user.created_at.isoformat(timespec="seconds"))
    console.print(table)
