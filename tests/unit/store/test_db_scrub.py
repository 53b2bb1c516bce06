"""Deleted rows leave no readable copy in SQLite's files (the database and its write-ahead log)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import delete

from tunedeck.store.db import sqlite_files, upgrade_database
from tunedeck.store.models import User
from tunedeck.store.store import JobStore

CANARY = b"canary-3f9a7c1e-deleted-user"


def _bytes_found(url: str) -> int:
    return sum(path.read_bytes().count(CANARY) for path in sqlite_files(url) if path.is_file())


def test_a_deleted_row_is_gone_from_the_database_and_its_log(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'tunedeck.db'}"
    upgrade_database(url)
    store = JobStore.open(url)
    user = store.users.create_user(CANARY.decode())
    assert _bytes_found(url) > 0  # the name is on disk while the row exists
    with store.db.write() as session:
        session.execute(delete(User).where(User.id == user.id))
    said = store.db.scrub_deleted_data()
    assert "truncated" in said
    assert _bytes_found(url) == 0
