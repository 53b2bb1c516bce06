"""`restore_backup`: a backup put back onto an empty installation, every committed prefix checked.

The database is restored in one transaction: the schema is migrated to the backup's
revision, the rows are inserted table by table in foreign-key order, the schema is
migrated on to this code's revision, and only then, once the artifacts are restored
and verified, is it committed. A failure leaves the database as it was.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Integer, Table, func, select, text

from tunedeck.backup.contents import (
    ARTIFACTS_FOLDER,
    INFO_NAME,
    MANIFESTS_FOLDER,
    MAX_INFO_BYTES,
    BackupError,
    BackupInfo,
    BackupProgress,
    RestoreReport,
    TableInfo,
    table_member,
)
from tunedeck.backup.restore_plan import RestorePlan, read_restore_plan
from tunedeck.backup.rows import KINDS, decode_row, reflected_tables
from tunedeck.backup.sealing import scratch_folder, unsealed
from tunedeck.backup.site import BackupSite, resolve_site
from tunedeck.core.errors import StorageError
from tunedeck.core.settings import Settings
from tunedeck.storage.base import MANIFEST_NAME, ArtifactStore, Manifest, user_prefix, validate_key
from tunedeck.storage.encryption import Keyring
from tunedeck.store.db import create_engine_for, migration_revisions, upgrade_connection
from tunedeck.store.models import Base

_ROWS_PER_INSERT = 500
_USERS_FOLDER = user_prefix("x").split("/")[0]


def _ignore(_stage: str, _done: int, _total: int) -> None:
    """The progress sink used when the caller passes none."""


def restore_backup(
    site: Settings | BackupSite,
    source: Path,
    *,
    keyring: Keyring | None,
    on_progress: BackupProgress | None = None,
    on_plan: Callable[[RestorePlan], None] | None = None,
    allow_unencrypted: bool = False,
) -> RestoreReport:
    """Restore the backup at `source` into the installation `site` names, which must be empty.

    `on_plan` hears who the restore will let in (users, admins, API tokens) before anything
    is written. With a key configured, an unencrypted backup (which anyone able to write the
    file could have edited) is refused unless `allow_unencrypted`.

    Empty means no row in any tunedeck table and, when the backup includes artifacts, no
    object under `users/` in the store. Without artifacts, the store is expected to hold
    them already: the prefixes it lacks (or holds damaged) are listed in the report.
    BackupError (or the keyring's StorageError) with a one-line reason otherwise.
    """
    place = resolve_site(site)
    progress = on_progress or _ignore
    source = source.expanduser().absolute()
    with unsealed(source, keyring, allow_unencrypted=allow_unencrypted) as plain:
        try:
            with tarfile.open(plain, "r:") as tar:
                return _restore(place, tar, str(source), progress, on_plan or _ignore_plan)
        except tarfile.TarError as error:
            raise BackupError(f"{source}: not a tunedeck backup, or a damaged one ({error})") from None


def _ignore_plan(_plan: RestorePlan) -> None:
    """The plan sink used when the caller passes none."""


def _restore(
    place: BackupSite,
    tar: tarfile.TarFile,
    where: str,
    progress: BackupProgress,
    on_plan: Callable[[RestorePlan], None],
) -> RestoreReport:
    members = _members(tar, where)
    info = BackupInfo.from_json(_read_member(tar, members, INFO_NAME, where, MAX_INFO_BYTES), source=where)
    _refuse_newer_revision(info, where)
    manifests = _backup_manifests(tar, members, where)
    _refuse_filled_installation(place, check_store=info.with_artifacts)
    on_plan(read_restore_plan(tar, members, info, where))
    with _filled_database(place.database_url, info, tar, members, where, progress):
        if info.with_artifacts:
            try:
                _restore_artifacts(tar, members, place.store, Path(where).parent, progress)
                checked = _verify(place.store, manifests, progress)
                if checked.missing:
                    raise BackupError(
                        f"{where}: restored prefixes do not match their manifests: {', '.join(checked.missing[:5])}"
                    )
            except BaseException:
                # The store held nothing under users/ before: what is there now came from this restore.
                with suppress(StorageError):  # the reason the restore failed matters more
                    place.store.delete_prefix(_USERS_FOLDER)
                raise
        else:
            checked = _verify(place.store, manifests, progress)
    return RestoreReport(
        alembic_revision=info.alembic_revision,
        with_artifacts=info.with_artifacts,
        rows={table.name: table.rows for table in info.tables},
        prefixes_verified=checked.prefixes,
        files_verified=checked.files,
        bytes_verified=checked.bytes,
        missing_prefixes=checked.missing,
    )


def _members(tar: tarfile.TarFile, where: str) -> dict[str, tarfile.TarInfo]:
    """Every member by name; BackupError for anything but a regular file with a safe name."""
    members: dict[str, tarfile.TarInfo] = {}
    for member in tar.getmembers():
        if not member.isfile():
            raise BackupError(f"{where}: member {member.name!r} is not a regular file")
        try:
            validate_key(member.name)
        except StorageError:
            raise BackupError(f"{where}: member {member.name!r} has an unsafe name") from None
        members[member.name] = member
    if INFO_NAME not in members:
        raise BackupError(f"{where}: not a tunedeck backup (no {INFO_NAME})")
    return members


def _read_member(tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo], name: str, where: str, limit: int) -> bytes:
    member = members.get(name)
    if member is None:
        raise BackupError(f"{where}: {name} is missing from the backup")
    if member.size > limit:
        raise BackupError(f"{where}: {name} is {member.size} bytes, more than the {limit} expected")
    handle = tar.extractfile(member)
    assert handle is not None  # a regular file, checked in _members
    return handle.read()


def _refuse_newer_revision(info: BackupInfo, where: str) -> None:
    known = migration_revisions()
    if info.alembic_revision not in known:
        raise BackupError(
            f"{where}: the backup's database is at schema revision {info.alembic_revision!r}, newer than this "
            f"version of tunedeck knows (up to {known[-1]!r}): restore it with the version that wrote it or a newer one"
        )


def _backup_manifests(tar: tarfile.TarFile, members: dict[str, tarfile.TarInfo], where: str) -> dict[str, Manifest]:
    """The manifest of every committed prefix the backup names, by prefix."""
    manifests: dict[str, Manifest] = {}
    head, tail = f"{MANIFESTS_FOLDER}/", f"/{MANIFEST_NAME}"
    for name in members:
        if name.startswith(head) and name.endswith(tail):
            prefix = name[len(head) : -len(tail)]
            data = _read_member(tar, members, name, where, MAX_INFO_BYTES)
            manifests[prefix] = Manifest.from_json(data, source=f"{where}: {name}")
    return manifests


def _refuse_filled_installation(place: BackupSite, *, check_store: bool) -> None:
    """BackupError saying what the target holds, unless its database (and, if `check_store`, its store) is empty."""
    engine = create_engine_for(place.database_url)
    try:
        with engine.connect() as connection:
            filled = _filled_tables(connection)
    finally:
        engine.dispose()
    held = place.store.list(_USERS_FOLDER) if check_store else []
    found = []
    if filled:
        found.append(f"the database holds {_rows_text(filled)}")
    if held:
        found.append(f"the store holds {_counted(len(held), 'object')} under {_USERS_FOLDER}/ (for example {held[0]})")
    if found:
        raise BackupError(f"the target is not empty: {'; '.join(found)}; restore only into an empty installation")


@contextmanager
def _filled_database(
    url: str,
    info: BackupInfo,
    tar: tarfile.TarFile,
    members: dict[str, tarfile.TarInfo],
    where: str,
    progress: BackupProgress,
) -> Iterator[None]:
    """The backup's rows inserted in one transaction, committed when the block ends without an error."""
    # Foreign keys are checked once at the end on SQLite, as `upgrade_database` does: migrations rebuild tables.
    engine = create_engine_for(url, sqlite_foreign_keys=False)
    try:
        with engine.connect() as connection, connection.begin():
            filled = _filled_tables(connection)  # again, inside the transaction that fills it
            if filled:
                raise BackupError(f"the target database is not empty: it holds {_rows_text(filled)}")
            target = MigrationContext.configure(connection).get_current_revision()
            if target not in (None, info.alembic_revision):
                raise BackupError(
                    f"the target database is already at schema revision {target!r} and the backup at "
                    f"{info.alembic_revision!r}: restore into a new database (or one that was never started)"
                )
            upgrade_connection(connection, info.alembic_revision)
            _insert_rows(connection, info, tar, members, where, progress)
            upgrade_connection(connection, "head")
            if engine.dialect.name == "sqlite":
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                if broken:
                    raise BackupError(f"{where}: rows point at rows the backup does not hold: {broken[:5]}")
            else:
                _reset_sequences(connection)
            yield
    finally:
        engine.dispose()


def _filled_tables(connection: Connection) -> dict[str, int]:
    """The tunedeck tables that hold rows, with their row counts."""
    present = set(connection.dialect.get_table_names(connection))
    filled = {}
    for table in Base.metadata.sorted_tables:
        if table.name in present:
            count = connection.scalar(select(func.count()).select_from(table)) or 0
            if count:
                filled[table.name] = count
    return filled


def _rows_text(filled: dict[str, int]) -> str:
    return ", ".join(f"{_counted(count, 'row')} in {name}" for name, count in filled.items())


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _insert_rows(
    connection: Connection,
    info: BackupInfo,
    tar: tarfile.TarFile,
    members: dict[str, tarfile.TarInfo],
    where: str,
    progress: BackupProgress,
) -> None:
    tables = {table.name: table for table in reflected_tables(connection)}
    done, total = 0, sum(table.rows for table in info.tables)
    progress("database", done, total)
    for described in info.tables:
        table = tables.get(described.name)
        if table is None:
            raise BackupError(f"{where}: table {described.name!r} is not part of the schema")
        _check_columns(table, described, where)
        done = _insert_table(connection, table, described, tar, members, where, done, total, progress)


def _check_columns(table: Table, described: TableInfo, where: str) -> None:
    unknown = sorted(set(described.columns) - set(table.columns.keys()))
    if unknown:
        raise BackupError(f"{where}: table {table.name!r} has no columns {unknown} in this schema")
    odd = sorted(name for name, kind in described.columns.items() if kind not in KINDS)
    if odd:
        raise BackupError(f"{where}: table {table.name!r}: unknown value kinds for columns {odd}")


def _insert_table(
    connection: Connection,
    table: Table,
    described: TableInfo,
    tar: tarfile.TarFile,
    members: dict[str, tarfile.TarInfo],
    where: str,
    done: int,
    total: int,
    progress: BackupProgress,
) -> int:
    """Insert one table's rows in batches; the rows done so far."""
    name = table_member(table.name)
    member = members.get(name)
    if member is None:
        raise BackupError(f"{where}: {name} is missing from the backup")
    handle = tar.extractfile(member)
    assert handle is not None  # a regular file, checked in _members
    dialect = connection.dialect.name
    batch: list[dict[str, Any]] = []
    count = 0
    for number, line in enumerate(io.TextIOWrapper(handle, encoding="utf-8"), start=1):
        batch.append(decode_row(line, described.columns, dialect=dialect, where=f"{where}: {name}:{number}"))
        if len(batch) == _ROWS_PER_INSERT:
            connection.execute(table.insert(), batch)
            count, done, batch = count + len(batch), done + len(batch), []
            progress("database", done, total)
    if batch:
        connection.execute(table.insert(), batch)
        count, done = count + len(batch), done + len(batch)
        progress("database", done, total)
    if count != described.rows:
        raise BackupError(f"{where}: {name} holds {count} rows, {INFO_NAME} says {described.rows}")
    return done


def _reset_sequences(connection: Connection) -> None:
    """Move each integer key's sequence past the restored ids, so the next insert gets a new one (PostgreSQL)."""
    for table in reflected_tables(connection):
        keys = list(table.primary_key.columns)
        if len(keys) != 1 or not isinstance(keys[0].type, Integer):
            continue
        column = keys[0].name
        connection.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence(:table, :column), COALESCE(MAX({column}), 1), "
                f"MAX({column}) IS NOT NULL) FROM {table.name}"
            ),
            {"table": table.name, "column": column},
        )


def _restore_artifacts(
    tar: tarfile.TarFile,
    members: dict[str, tarfile.TarInfo],
    store: ArtifactStore,
    scratch_parent: Path,
    progress: BackupProgress,
) -> None:
    """Every stored object of the backup put back; each prefix's manifest last, as a commit does."""
    head = f"{ARTIFACTS_FOLDER}/"
    objects = [member for name, member in members.items() if name.startswith(head)]
    objects.sort(key=lambda member: member.name.endswith(f"/{MANIFEST_NAME}"))
    done, total = 0, sum(member.size for member in objects)
    progress("artifacts", done, total)
    with scratch_folder(scratch_parent) as scratch:
        local = scratch / "object"
        for member in objects:
            source = tar.extractfile(member)
            assert source is not None  # a regular file, checked in _members
            with source, open(local, "wb") as sink:
                shutil.copyfileobj(source, sink, 1024 * 1024)
            store.put_file(member.name[len(head) :], local)
            done += member.size
            progress("artifacts", done, total)


class _Verified:
    """Committed prefixes checked against the store: counts and the ones that failed."""

    def __init__(self) -> None:
        self.prefixes = 0
        self.files = 0
        self.bytes = 0
        self.missing: list[str] = []


def _verify(store: ArtifactStore, manifests: dict[str, Manifest], progress: BackupProgress) -> _Verified:
    """Check that the store holds every prefix with the manifest the backup recorded, each file intact."""
    checked = _Verified()
    progress("verification", 0, len(manifests))
    for index, (prefix, manifest) in enumerate(sorted(manifests.items())):
        held = store.read_manifest(prefix)
        if held is not None and held.digest == manifest.digest and store.verify(prefix):
            checked.prefixes += 1
            checked.files += len(manifest.files)
            checked.bytes += manifest.total_bytes
        else:
            checked.missing.append(prefix)
        progress("verification", index + 1, len(manifests))
    return checked
