"""`create_backup`: every row, every committed prefix's manifest and optionally every stored object, in one file."""

from __future__ import annotations

import io
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import Connection, Table, func, select

from tunedeck import __version__
from tunedeck.backup.contents import (
    INFO_NAME,
    BackupError,
    BackupInfo,
    BackupProgress,
    BackupReport,
    TableInfo,
    artifact_member,
    manifest_member,
    table_member,
)
from tunedeck.backup.rows import encode_row, reflected_tables, table_kinds
from tunedeck.backup.sealing import scratch_file, scratch_folder, seal
from tunedeck.backup.site import BackupSite, resolve_site
from tunedeck.core.settings import Settings
from tunedeck.storage.base import MANIFEST_NAME, ArtifactStore
from tunedeck.storage.encryption import Keyring
from tunedeck.store.db import create_engine_for, current_revision, sqlite_files

_ROWS_PER_READ = 1000


def _ignore(_stage: str, _done: int, _total: int) -> None:
    """The progress sink used when the caller passes none."""


def create_backup(
    site: Settings | BackupSite,
    out: Path,
    *,
    with_artifacts: bool,
    keyring: Keyring | None,
    on_progress: BackupProgress | None = None,
) -> BackupReport:
    """Back up the installation `site` names into the new file `out`.

    Encrypted with `keyring` (a plain tar when it is None: the caller decides whether
    that is allowed). The database is read in one transaction, so its rows are one
    consistent snapshot. BackupError when `out` exists or its folder does not, or the
    database has no tunedeck schema.
    """
    place = resolve_site(site)
    progress = on_progress or _ignore
    out = out.expanduser().absolute()
    if out.exists():
        raise BackupError(f"{out}: already exists; choose another --out")
    if not out.parent.is_dir():
        raise BackupError(f"{out.parent}: no such folder for the backup")
    database_files = sqlite_files(place.database_url)
    if database_files and not database_files[0].is_file():
        raise BackupError(f"{database_files[0]}: no such database; check TUNEDECK_DATA_DIR or TUNEDECK_DATABASE_URL")
    revision = current_revision(place.database_url)
    if revision is None:
        raise BackupError("the database has no tunedeck tables yet: there is nothing to back up")
    with scratch_file(out.parent, ".tar") as plain, scratch_folder(out.parent) as scratch:
        with tarfile.open(plain, "w", format=tarfile.PAX_FORMAT) as tar:
            rows = _add_database(tar, place.database_url, revision, with_artifacts, scratch, progress)
            # Listed after the rows were read: a manifest is stored before its row says "committed",
            # so every prefix a backed-up row calls committed has its manifest here.
            manifest_keys = committed_manifest_keys(place.store)
            _add_manifests(tar, place.store, manifest_keys, progress)
            files, artifact_bytes = _add_artifacts(tar, place.store, scratch, progress) if with_artifacts else (0, 0)
        size = plain.stat().st_size
        if keyring is not None:
            progress("encryption", 0, size)
        seal(plain, out, keyring)
        if keyring is not None:
            progress("encryption", size, size)
    return BackupReport(
        path=out,
        encrypted=keyring is not None,
        with_artifacts=with_artifacts,
        alembic_revision=revision,
        rows=rows,
        prefixes=len(manifest_keys),
        artifact_files=files,
        artifact_bytes=artifact_bytes,
        size_bytes=out.stat().st_size,
    )


def _add_database(
    tar: tarfile.TarFile,
    url: str,
    revision: str,
    with_artifacts: bool,
    scratch: Path,
    progress: BackupProgress,
) -> dict[str, int]:
    """`backup.json` and one `db/<table>.jsonl` per table, all read from one snapshot; rows per table."""
    engine = create_engine_for(url)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "postgresql":
                connection = connection.execution_options(isolation_level="REPEATABLE READ")
            with connection.begin():
                tables = reflected_tables(connection)
                counts = {
                    table.name: connection.scalar(select(func.count()).select_from(table)) or 0 for table in tables
                }
                info = BackupInfo(
                    created_at=datetime.now(UTC).isoformat(),
                    tunedeck_version=__version__,
                    alembic_revision=revision,
                    tables=tuple(TableInfo(t.name, counts[t.name], table_kinds(t)) for t in tables),
                    with_artifacts=with_artifacts,
                )
                _add_bytes(tar, INFO_NAME, info.to_json())
                done, total = 0, sum(counts.values())
                progress("database", done, total)
                for table in tables:
                    done = _add_table(tar, connection, table, scratch, done, total, progress)
    finally:
        engine.dispose()
    return counts


def _add_table(
    tar: tarfile.TarFile,
    connection: Connection,
    table: Table,
    scratch: Path,
    done: int,
    total: int,
    progress: BackupProgress,
) -> int:
    """Write `table`'s rows (ordered by primary key) to a scratch file, then into the tar; rows done so far."""
    kinds = table_kinds(table)
    order = list(table.primary_key.columns) or list(table.columns)
    path = scratch / f"{table.name}.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        result = connection.execution_options(stream_results=True).execute(select(table).order_by(*order))
        for batch in result.mappings().partitions(_ROWS_PER_READ):
            for row in batch:
                handle.write(encode_row(dict(row), kinds) + "\n")
            done += len(batch)
            progress("database", done, total)
    _add_file(tar, table_member(table.name), path)
    path.unlink()
    return done


def committed_manifest_keys(store: ArtifactStore) -> list[str]:
    """The `MANIFEST.json` key of every committed prefix in the store."""
    return [key for key in store.list("") if key.endswith(f"/{MANIFEST_NAME}")]


def _add_manifests(tar: tarfile.TarFile, store: ArtifactStore, keys: list[str], progress: BackupProgress) -> None:
    """The manifest at each of `keys`, under `manifests/<prefix>/`."""
    for index, key in enumerate(keys):
        prefix = key.removesuffix(f"/{MANIFEST_NAME}")
        _add_bytes(tar, manifest_member(prefix), store.read_bytes(key))
        progress("manifests", index + 1, len(keys))


def _add_artifacts(
    tar: tarfile.TarFile, store: ArtifactStore, scratch: Path, progress: BackupProgress
) -> tuple[int, int]:
    """Every stored object under `artifacts/`, one at a time through a scratch file; (files, bytes)."""
    keys = store.list("")
    stored = 0
    progress("artifacts", 0, len(keys))
    for index, key in enumerate(keys):
        local = store.get_file(key, scratch / "object")
        stored += local.stat().st_size
        _add_file(tar, artifact_member(key), local)
        local.unlink()
        progress("artifacts", index + 1, len(keys))
    return len(keys), stored


def _add_file(tar: tarfile.TarFile, name: str, path: Path) -> None:
    with open(path, "rb") as handle:
        _add_stream(tar, name, handle, path.stat().st_size)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    _add_stream(tar, name, io.BytesIO(data), len(data))


def _add_stream(tar: tarfile.TarFile, name: str, stream: BinaryIO, size: int) -> None:
    member = tarfile.TarInfo(name)
    member.size, member.mode, member.mtime = size, 0o600, int(time.time())
    tar.addfile(member, stream)
