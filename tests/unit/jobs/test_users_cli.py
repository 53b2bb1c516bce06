"""`tunedeck users create | token | list` against a SQLite file."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from typer.testing import CliRunner

from tunedeck.cli.users_commands import app
from tunedeck.jobs.store import JobStore


def test_create_token_and_list(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    created = runner.invoke(app, ["create", "alice", "--admin", "--database-url", url])
    assert created.exit_code == 0, created.output
    assert "admin" in created.output and "alice" in created.output

    issued = runner.invoke(app, ["token", "alice", "--database-url", url])
    assert issued.exit_code == 0, issued.output
    plain = issued.stdout.strip().splitlines()[-1]
    assert plain.startswith("tdk_")

    with JobStore.open(url) as store:
        user = store.users.authenticate(plain)
        assert user is not None and user.name == "alice" and user.is_admin
        with store.db.read() as session:
            rows = session.execute(text("SELECT * FROM api_tokens")).all()
        assert plain not in repr(rows)

    listed = runner.invoke(app, ["list", "--database-url", url])
    assert listed.exit_code == 0 and "alice" in listed.output

    duplicate = runner.invoke(app, ["create", "alice", "--database-url", url])
    assert duplicate.exit_code == 1 and "already exists" in duplicate.output
    unknown = runner.invoke(app, ["token", "bob", "--database-url", url])
    assert unknown.exit_code == 1 and "not found" in unknown.output
