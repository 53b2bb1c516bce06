"""What a backup holds: the `backup.json` description, the member names of the tar, and the reports.

The tar holds, in this order: `backup.json`, `db/<table>.jsonl` for each table in
foreign-key order, `manifests/<prefix>/MANIFEST.json` for each committed prefix of the
store, and, when artifacts are included, `artifacts/<key>` for every stored object.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tunedeck.core.errors import TunedeckError
from tunedeck.storage.base import MANIFEST_NAME

BACKUP_FORMAT = "tunedeck.backup/1"
# Binds the encrypted file to its purpose: a backup cannot be passed off as another encrypted object.
BACKUP_AAD = BACKUP_FORMAT.encode("ascii")
INFO_NAME = "backup.json"
DB_FOLDER = "db"
MANIFESTS_FOLDER = "manifests"
ARTIFACTS_FOLDER = "artifacts"
MAX_INFO_BYTES = 16 * 1024 * 1024

# Told `(stage, done, total)`: stage is `database` (rows), `manifests` (prefixes), `artifacts` (objects
# when backing up, bytes when restoring), `encryption` (bytes) or `verification` (prefixes).
# Called on the caller's thread; what it raises ends the backup or the restore.
BackupProgress = Callable[[str, int, int], None]


class BackupError(TunedeckError):
    """A backup cannot be written or restored: the message says what is wrong and where."""


@dataclass(frozen=True)
class TableInfo:
    """One table of the backup: its row count and how each column's values are written (see `rows`)."""

    name: str
    rows: int
    columns: dict[str, str]


@dataclass(frozen=True)
class BackupInfo:
    """The `backup.json` member: what the backup holds and which schema its rows follow."""

    created_at: str
    tunedeck_version: str
    alembic_revision: str
    tables: tuple[TableInfo, ...]
    with_artifacts: bool

    def to_json(self) -> bytes:
        """The member's bytes."""
        body = {
            "format": BACKUP_FORMAT,
            "created_at": self.created_at,
            "tunedeck_version": self.tunedeck_version,
            "alembic_revision": self.alembic_revision,
            "with_artifacts": self.with_artifacts,
            "tables": [{"name": t.name, "rows": t.rows, "columns": t.columns} for t in self.tables],
        }
        return json.dumps(body, indent=1).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, source: str) -> BackupInfo:
        """Parse the member; BackupError naming `source` when it is not a tunedeck backup description."""
        try:
            body = json.loads(data)
            if not isinstance(body, dict) or body.get("format") != BACKUP_FORMAT:
                found = body.get("format") if isinstance(body, dict) else type(body).__name__
                raise BackupError(f"{source}: {INFO_NAME} has format {found!r}, expected {BACKUP_FORMAT!r}")
            tables = tuple(
                TableInfo(
                    name=str(t["name"]), rows=int(t["rows"]), columns={str(k): str(v) for k, v in t["columns"].items()}
                )
                for t in body["tables"]
            )
            return cls(
                created_at=str(body["created_at"]),
                tunedeck_version=str(body["tunedeck_version"]),
                alembic_revision=str(body["alembic_revision"]),
                tables=tables,
                with_artifacts=bool(body["with_artifacts"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise BackupError(f"{source}: {INFO_NAME} is not a valid backup description ({error})") from None

    def rows_of(self, table: str) -> int:
        """Rows the backup holds for `table` (0 when it has none)."""
        return next((t.rows for t in self.tables if t.name == table), 0)


def table_member(table: str) -> str:
    """Tar member name of a table's rows."""
    return f"{DB_FOLDER}/{table}.jsonl"


def manifest_member(prefix: str) -> str:
    """Tar member name of a committed prefix's manifest."""
    return f"{MANIFESTS_FOLDER}/{prefix}/{MANIFEST_NAME}"


def artifact_member(key: str) -> str:
    """Tar member name of a stored object."""
    return f"{ARTIFACTS_FOLDER}/{key}"


# The summary an operator reads after a backup or a restore: table name -> what it is called.
SUMMARY_TABLES = {
    "users": "users",
    "datasets": "datasets",
    "dataset_versions": "dataset versions",
    "jobs": "jobs",
    "checkpoints": "checkpoints",
}


@dataclass(frozen=True)
class BackupReport:
    """What `create_backup` wrote."""

    path: Path
    encrypted: bool
    with_artifacts: bool
    alembic_revision: str
    rows: dict[str, int]
    prefixes: int
    artifact_files: int
    artifact_bytes: int
    size_bytes: int


@dataclass(frozen=True)
class RestoreReport:
    """What `restore_backup` restored and verified.

    `missing_prefixes` are committed prefixes the store does not hold intact (only possible
    when the backup has no artifacts and the store was expected to hold them).
    """

    alembic_revision: str
    with_artifacts: bool
    rows: dict[str, int]
    prefixes_verified: int
    files_verified: int
    bytes_verified: int
    missing_prefixes: list[str] = field(default_factory=list)


def summary_counts(rows: dict[str, int]) -> dict[str, int]:
    """The rows an operator cares about, under readable names."""
    return {label: rows.get(table, 0) for table, label in SUMMARY_TABLES.items()}
