"""`tunedeck users delete` prints the receipt; `tunedeck deletions list | show` read receipts back."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tunedeck.cli.deletions_commands import app as deletions_app
from tunedeck.cli.users_commands import app as users_app
from tunedeck.store.store import JobStore


def test_an_admin_deletes_a_user_from_the_cli_and_reads_the_receipt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with JobStore.open(url) as store:
        store.users.create_user("root", admin=True)
        bob = store.users.create_user("bob")
        store.users.issue_token(bob)
    runner = CliRunner()
    refused = runner.invoke(users_app, ["delete", "root", "--by", "bob", "--database-url", url])
    assert refused.exit_code == 1 and "only an admin" in refused.output
    deleted = runner.invoke(users_app, ["delete", "bob", "--by", "root", "--database-url", url])
    assert deleted.exit_code == 0, deleted.output
    assert "user bob" in deleted.stdout and "pending" in deleted.stdout and "api tokens" in deleted.stdout
    receipt_id = deleted.stdout.split()[0]

    listed = runner.invoke(deletions_app, ["list", "--user", "root", "--database-url", url])
    assert listed.exit_code == 0 and receipt_id in listed.stdout
    shown = runner.invoke(deletions_app, ["show", receipt_id, "--database-url", url])
    assert shown.exit_code == 0 and "users" in shown.stdout
    missing = runner.invoke(deletions_app, ["show", "del_nothing", "--database-url", url])
    assert missing.exit_code == 1 and "not found" in missing.output
