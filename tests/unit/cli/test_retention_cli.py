"""`tunedeck retention plan | sweep` against a SQLite file and a local artifact folder, with the clock given."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tunedeck.cli.retention_commands import app
from tunedeck.storage.base import dataset_prefix
from tunedeck.storage.factory import open_store
from tunedeck.store.retention import RetentionBounds
from tunedeck.store.store import JobStore


def test_plan_lists_and_removes_nothing_then_sweep_removes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    storage = (tmp_path / "artifacts").as_uri()
    monkeypatch.setenv("TUNEDECK_STORAGE_URL", storage)
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(tmp_path / "data"))
    artifacts = open_store(storage)
    with JobStore.open(url) as store:
        alice = store.users.create_user("alice")
        dataset = store.datasets.create_dataset(alice, "notes")
        key = f"{dataset_prefix(alice.id, 'dsu_one')}/data.jsonl"
        artifacts.put_bytes(key, b"{}\n")
        version = store.datasets.add_version(
            alice, dataset.id, sha256="0" * 64, format="jsonl", rows=1, storage_key=key
        )
        store.retention.set_user_policy(alice, {"raw_data_days": 10}, RetentionBounds())
    future = datetime(2100, 1, 1, tzinfo=UTC).isoformat()
    runner = CliRunner()

    early = runner.invoke(app, ["plan", "--database-url", url])
    assert early.exit_code == 0 and "nothing is due" in early.output
    planned = runner.invoke(app, ["plan", "--now", future, "--user", "alice", "--database-url", url])
    assert planned.exit_code == 0, planned.output
    assert "raw data" in planned.output and "notes v1" in planned.output
    assert artifacts.exists(key)
    unknown = runner.invoke(app, ["plan", "--user", "carol", "--database-url", url])
    assert unknown.exit_code == 1 and "not found" in unknown.output
    bad = runner.invoke(app, ["plan", "--now", "tomorrow", "--database-url", url])
    assert bad.exit_code == 2 and "not an ISO 8601 time" in bad.output

    swept = runner.invoke(app, ["sweep", "--now", future, "--database-url", url])
    assert swept.exit_code == 0, swept.output
    assert "marked purged" in swept.output
    assert not artifacts.exists(key)
    with JobStore.open(url) as store:
        assert store.datasets.get_version(alice, version.id).purged_at is not None
    again = runner.invoke(app, ["sweep", "--now", future, "--database-url", url])
    assert again.exit_code == 0 and "nothing was due" in again.output
