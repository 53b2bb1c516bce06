"""`create_backup` then `restore_backup` into a new, empty installation gives back every row and every prefix."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from tests.fixtures.installations import every_row, fill, new_installation, use_key
from tunedeck.backup.contents import BackupError
from tunedeck.backup.create import create_backup
from tunedeck.backup.restore import restore_backup
from tunedeck.storage.factory import open_store
from tunedeck.store.db import create_engine_for, current_revision, migration_revisions, upgrade_database
from tunedeck.store.records import NewEvent
from tunedeck.store.store import JobStore


@pytest.mark.parametrize(
    ("backed_up_on", "restored_on"),
    [
        ("sqlite", "sqlite"),
        pytest.param("postgres", "postgres", marks=pytest.mark.postgres),
        pytest.param("sqlite", "postgres", marks=pytest.mark.postgres),
    ],
)
def test_an_encrypted_backup_with_artifacts_restores_every_row_and_verifies_every_prefix(
    backed_up_on: str,
    restored_on: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    def database(backend: str) -> str | None:
        if backend == "sqlite":
            return None
        make: Callable[[], str] = request.getfixturevalue("postgres_database_factory")
        return make()

    keyring = use_key(monkeypatch)
    source = new_installation(tmp_path / "old", database(backed_up_on))
    prefixes = fill(source, tmp_path / "work")
    out = tmp_path / "backups" / "site.tdbak"
    out.parent.mkdir()
    stages: set[str] = set()

    made = create_backup(
        source.site, out, with_artifacts=True, keyring=keyring, on_progress=lambda stage, _d, _t: stages.add(stage)
    )

    assert made.encrypted and made.prefixes == 2 and made.rows["users"] == 1 and made.rows["metrics"] == 4
    assert out.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in out.parent.iterdir()) == ["site.tdbak"]  # no scratch file left behind
    assert b"alice" not in out.read_bytes() and not _is_tar(out)
    assert {"database", "manifests", "artifacts", "encryption"} <= stages

    target = new_installation(tmp_path / "new", database(restored_on))
    restored = restore_backup(target.site, out, keyring=keyring)

    assert restored.with_artifacts and restored.missing_prefixes == []
    assert restored.prefixes_verified == 2 and restored.files_verified == 3
    assert every_row(target.url) == every_row(source.url)
    assert [row["tag"] for row in every_row(target.url)["job_tags"]] == ["baseline", "v1"]
    assert all(target.site.store.verify(prefix) for prefix in prefixes)
    assert sorted(p.name for p in out.parent.iterdir()) == ["site.tdbak"]
    with JobStore.open(target.url) as jobs:  # new rows get fresh integer ids (sequences moved past the restored)
        job_id = every_row(target.url)["jobs"][0]["id"]
        assert jobs.telemetry.append_events(job_id, 1, [NewEvent(seq=99, type="log", payload={})]) == 1


def test_a_database_only_backup_restored_beside_its_store_verifies_it_and_names_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyring = use_key(monkeypatch)
    source = new_installation(tmp_path / "old")
    kept, lost = fill(source, tmp_path / "work")
    out = tmp_path / "db-only.tdbak"
    made = create_backup(source.site, out, with_artifacts=False, keyring=keyring)
    assert made.artifact_files == 0 and made.prefixes == 2

    # The database restored next to the bucket it was backed up beside, which kept one prefix and lost one.
    source.site.store.delete_prefix(lost)
    target = new_installation(tmp_path / "new", store=source.site.store)
    restored = restore_backup(target.site, out, keyring=keyring)

    assert restored.prefixes_verified == 1 and restored.missing_prefixes == [lost]
    assert target.site.store.verify(kept)
    assert every_row(target.url) == every_row(source.url)


def test_restore_refuses_an_installation_that_holds_rows_or_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyring = use_key(monkeypatch)
    source = new_installation(tmp_path / "old")
    fill(source, tmp_path / "work")
    out = tmp_path / "site.tdbak"
    create_backup(source.site, out, with_artifacts=True, keyring=keyring)

    with_user = new_installation(tmp_path / "with-user")
    with JobStore.open(with_user.url) as jobs:
        jobs.users.create_user("bob")
    with pytest.raises(
        BackupError, match=r"not empty: the database holds 1 row in users; restore only into an empty installation"
    ):
        restore_backup(with_user.site, out, keyring=keyring)
    assert [row["name"] for row in every_row(with_user.url)["users"]] == ["bob"]
    assert with_user.site.store.list("users") == []

    target = new_installation(tmp_path / "new")
    target.site.store.put_bytes("users/usr_someone/notes.txt", b"kept")
    with pytest.raises(
        BackupError,
        match=r"not empty: the store holds 1 object under users/ \(for example users/usr_someone/notes.txt\)",
    ):
        restore_backup(target.site, out, keyring=keyring)
    assert target.site.store.read_bytes("users/usr_someone/notes.txt") == b"kept"
    assert current_revision(target.url) is None  # refused before anything was written


def test_a_failed_restore_leaves_the_database_and_the_store_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = new_installation(tmp_path / "old")
    fill(source, tmp_path / "work")
    plain = tmp_path / "plain.tar"
    create_backup(source.site, plain, with_artifacts=True, keyring=None)
    assert _is_tar(plain)
    # A plain backup whose stored file no longer matches its manifest (the tar itself is well formed).
    damaged = tmp_path / "damaged.tar"
    with tarfile.open(plain) as tar, tarfile.open(damaged, "w") as out:
        for member in tar.getmembers():
            data = tar.extractfile(member)
            if member.name.endswith("train.jsonl"):
                body = b'{"text": "HELLO"}\n{"text": "world"}\n'
                member.size = len(body)
                data = io.BytesIO(body)
            out.addfile(member, data)

    target = new_installation(tmp_path / "new")
    with pytest.raises(BackupError, match=r"do not match their manifests: users/usr_\w+/datasets/dsv_upload1"):
        restore_backup(target.site, damaged, keyring=None)
    assert current_revision(target.url) is None  # even the schema was rolled back with the rows
    assert target.site.store.list("users") == []


def test_a_backup_of_a_newer_schema_is_refused(tmp_path: Path) -> None:
    source = new_installation(tmp_path / "old")
    fill(source, tmp_path / "work")
    plain = tmp_path / "plain.tar"
    create_backup(source.site, plain, with_artifacts=False, keyring=None)
    newer = tmp_path / "newer.tar"
    with tarfile.open(plain) as tar, tarfile.open(newer, "w") as out:
        for member in tar.getmembers():
            data = tar.extractfile(member)
            if member.name == "backup.json":
                manifest = json.loads(data.read())  # type: ignore[union-attr]
                body = json.dumps({**manifest, "alembic_revision": "9999"}).encode()
                member.size = len(body)
                data = io.BytesIO(body)
            out.addfile(member, data)

    target = new_installation(tmp_path / "new")
    with pytest.raises(BackupError, match="schema revision '9999', newer than this version of tunedeck knows"):
        restore_backup(target.site, newer, keyring=None)


def _is_tar(path: Path) -> bool:
    return tarfile.is_tarfile(path)


def test_artifacts_backed_up_from_a_folder_are_restored_into_an_s3_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: str, s3_store_url: str
) -> None:
    keyring = use_key(monkeypatch)
    source = new_installation(tmp_path / "old")
    prefixes = fill(source, tmp_path / "work")
    out = tmp_path / "site.tdbak"
    create_backup(source.site, out, with_artifacts=True, keyring=keyring)

    bucket = open_store(s3_store_url, s3_endpoint_url=s3_server)
    target = new_installation(tmp_path / "new", store=bucket)
    restored = restore_backup(target.site, out, keyring=keyring)

    assert restored.prefixes_verified == 2 and restored.missing_prefixes == []
    assert all(bucket.verify(prefix) for prefix in prefixes)
    assert bucket.list("users") == source.site.store.list("users")


def test_a_backup_of_an_older_schema_is_migrated_on_the_way_in(tmp_path: Path) -> None:
    source = new_installation(tmp_path / "old")
    upgrade_database(source.url, "0008")  # the schema of the release before this one
    engine = create_engine_for(source.url)
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO users (id, name, role, created_at) VALUES ('usr_old', 'old', 'user', :now)"),
            {"now": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).replace(tzinfo=None)},  # SQLite keeps naive UTC
        )
    engine.dispose()
    plain = tmp_path / "old.tar"
    assert create_backup(source.site, plain, with_artifacts=False, keyring=None).alembic_revision == "0008"

    target = new_installation(tmp_path / "new")
    restored = restore_backup(target.site, plain, keyring=None)

    assert restored.alembic_revision == "0008" and current_revision(target.url) == migration_revisions()[-1]
    users = every_row(target.url)["users"]
    assert [(u["id"], u["created_at"]) for u in users] == [("usr_old", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))]
