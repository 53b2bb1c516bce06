"""The migrations produce exactly the models' schema; SQLite engines are configured as promised."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError, StatementError

from tunedeck.core.errors import TunedeckError
from tunedeck.store.db import Database, create_engine_for, normalise_url
from tunedeck.store.models import Base, Job


def test_migrated_schema_matches_the_models(sqlite_url: str) -> None:
    engine = create_engine_for(sqlite_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            differences = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert differences == []


def test_sqlite_uses_wal_foreign_keys_and_busy_timeout(sqlite_url: str) -> None:
    db = Database.connect(sqlite_url)
    try:
        with db.read() as session:
            assert session.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert session.execute(text("PRAGMA foreign_keys")).scalar() == 1
            assert session.execute(text("PRAGMA busy_timeout")).scalar() == 30000
        with pytest.raises(IntegrityError), db.write() as session:
            session.execute(
                text("INSERT INTO api_tokens (id, user_id, token_sha256, name, created_at) "
                     "VALUES ('t', 'no-such-user', 'h', 'n', '2026-01-01')")
            )  # fmt: skip
    finally:
        db.close()


def test_naive_datetimes_are_refused(sqlite_url: str) -> None:
    db = Database.connect(sqlite_url)
    try:
        with pytest.raises(StatementError, match="naive datetime"), db.write() as session:
            session.add(Job(id="j", owner_id="u", name="n", state="queued", config={}, created_at=datetime(2026, 1, 1)))
    finally:
        db.close()


def test_urls_are_normalised_to_psycopg() -> None:
    assert normalise_url("postgresql://u@h:5432/db") == "postgresql+psycopg://u@h:5432/db"
    assert normalise_url("postgresql+psycopg://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalise_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    with pytest.raises(TunedeckError, match="unsupported"):
        create_engine_for("mysql://u@h/db")


def test_importing_the_packages_creates_nothing(tmp_path: Path) -> None:
    code = "import tunedeck.store.store, tunedeck.store.migrations, tunedeck.storage.factory, tunedeck.storage.s3"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True)
    assert list(tmp_path.iterdir()) == []
