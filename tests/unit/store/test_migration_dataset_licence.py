"""Migration 0014: datasets gain a nullable licence and rights note; downgrading drops them and keeps the rows."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import inspect, text

from tunedeck.store.db import MIGRATIONS_DIR, create_engine_for, current_revision, upgrade_database

REVISION = "0014_dataset_licence"
BEFORE = "0013_openai_fine_tuning"


def _downgrade(url: str, revision: str) -> None:
    """Run the packaged migrations down to `revision`, foreign keys off as when upgrading (SQLite copies tables)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = create_engine_for(url, sqlite_foreign_keys=False)
    try:
        with engine.connect() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
            connection.commit()
    finally:
        engine.dispose()


def _columns(url: str, table: str) -> set[str]:
    engine = create_engine_for(url)
    try:
        return {column["name"] for column in inspect(engine).get_columns(table)}
    finally:
        engine.dispose()


def _execute(url: str, statement: str) -> list[tuple[object, ...]]:
    engine = create_engine_for(url)
    try:
        with engine.begin() as connection:
            result = connection.execute(text(statement))
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        engine.dispose()


def test_upgrade_adds_empty_rights_to_existing_datasets_and_downgrade_removes_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'migrations.db'}"
    upgrade_database(url, BEFORE)
    assert {"licence", "rights_note"}.isdisjoint(_columns(url, "datasets"))
    _execute(
        url, "INSERT INTO users (id, name, role, created_at) VALUES ('u1', 'alice', 'user', '2026-01-01 00:00:00')"
    )
    _execute(
        url, "INSERT INTO datasets (id, owner_id, name, created_at) VALUES ('ds1', 'u1', 'qa', '2026-01-01 00:00:00')"
    )
    _execute(
        url,
        "INSERT INTO dataset_versions (id, dataset_id, owner_id, version, sha256, format, kind, rows, storage_key, "
        "manifest, sealed, reports, created_at) VALUES ('dv1', 'ds1', 'u1', 1, 'abc', 'text', 'text', 1, 'k', '{}', "
        "0, '{}', '2026-01-01 00:00:00')",
    )

    upgrade_database(url, REVISION)
    assert current_revision(url) == REVISION
    assert {"licence", "rights_note"} <= _columns(url, "datasets")
    assert _execute(url, "SELECT name, licence, rights_note FROM datasets") == [("qa", None, None)]
    _execute(url, "UPDATE datasets SET licence = 'cc-by-4.0', rights_note = 'ours' WHERE id = 'ds1'")

    _downgrade(url, BEFORE)
    assert current_revision(url) == BEFORE
    assert {"licence", "rights_note"}.isdisjoint(_columns(url, "datasets"))
    # The table was copied without the columns: its rows, and the versions that point at them, stay.
    assert _execute(url, "SELECT id, name FROM datasets") == [("ds1", "qa")]
    assert _execute(url, "SELECT id, dataset_id FROM dataset_versions") == [("dv1", "ds1")]

    upgrade_database(url)
    assert _execute(url, "SELECT licence FROM datasets") == [(None,)]
