"""`tunedeck users create | token | list | quota` against a SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from tunedeck.cli.users_commands import app
from tunedeck.store.store import JobStore


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


def test_quota_shows_and_sets_limits_recorded_under_an_admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(tmp_path / "data"))  # where the CLI measures stored bytes
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    for args in (["create", "root", "--admin"], ["create", "alice"]):
        assert runner.invoke(app, [*args, "--database-url", url]).exit_code == 0

    everyone = runner.invoke(app, ["quota", "--everyone", "--queued-jobs", "4", "--by", "root", "--database-url", url])
    assert everyone.exit_code == 0, everyone.output
    assert "queued_jobs" in everyone.output and "4" in everyone.output
    own = runner.invoke(
        app,
        ["quota", "alice", "--running-jobs", "1", "--storage-gb", "2.5", "--device-hours", "10", "--by", "root",
         "--database-url", url],
    )  # fmt: skip
    assert own.exit_code == 0, own.output
    with JobStore.open(url) as store:
        alice = store.users.get_user_by_name("alice")
        limits = store.quotas.limits_for(alice.id)
        assert (limits.queued_jobs, limits.running_jobs, limits.storage_bytes, limits.device_hours) == (
            4, 1, 2_500_000_000, 10.0
        )  # fmt: skip
        assert store.quotas.settings(alice.id).updated_by == store.users.get_user_by_name("root").id
    cleared = runner.invoke(app, ["quota", "alice", "--clear", "running_jobs", "--by", "root", "--database-url", url])
    assert cleared.exit_code == 0, cleared.output
    with JobStore.open(url) as store:
        assert store.quotas.limits_for(store.users.get_user_by_name("alice").id).running_jobs is None

    unsigned = runner.invoke(app, ["quota", "alice", "--queued-jobs", "1", "--database-url", url])
    assert unsigned.exit_code == 1 and "--by" in unsigned.output
    member = runner.invoke(app, ["quota", "alice", "--queued-jobs", "1", "--by", "alice", "--database-url", url])
    assert member.exit_code == 1 and "not an admin" in member.output
    both = runner.invoke(app, ["quota", "alice", "--everyone", "--database-url", url])
    assert both.exit_code == 1 and "--everyone" in both.output
    typo = runner.invoke(app, ["quota", "alice", "--clear", "gpus", "--by", "root", "--database-url", url])
    assert typo.exit_code == 1 and "gpus" in typo.output
