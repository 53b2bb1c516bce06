"""Rows as JSON lines that read back the same on SQLite and PostgreSQL.

Each column is written by its kind: `datetime` as ISO-8601 in UTC, `json` as the JSON
value itself, `bytes` as base64, and `value` (text, numbers, booleans) as is. The kinds
are recorded in `backup.json`, so a restore decodes values without guessing from them.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, Connection, DateTime, LargeBinary, MetaData, Table

from tunedeck.backup.contents import BackupError
from tunedeck.store.models import Base

DATETIME, JSON_VALUE, BYTES, PLAIN = "datetime", "json", "bytes", "value"
KINDS = (DATETIME, JSON_VALUE, BYTES, PLAIN)


def reflected_tables(connection: Connection) -> list[Table]:
    """The tunedeck tables the database holds, as the database defines them, in foreign-key order.

    Reflected rather than taken from the models, so that a database at an older revision
    is read and written with the columns it really has.
    """
    present = set(connection.dialect.get_table_names(connection))
    names = [table.name for table in Base.metadata.sorted_tables if table.name in present]
    reflected = MetaData()
    reflected.reflect(connection, only=names)
    return [reflected.tables[name] for name in names]


def column_kind(column: Column[Any]) -> str:
    """How values of `column` (reflected from either database) are written."""
    column_type = column.type
    if isinstance(column_type, DateTime):
        return DATETIME
    if isinstance(column_type, JSON):
        return JSON_VALUE
    if isinstance(column_type, LargeBinary):
        return BYTES
    return PLAIN


def table_kinds(table: Table) -> dict[str, str]:
    """Every column of `table` and its kind, in the table's column order."""
    return {column.name: column_kind(column) for column in table.columns}


def encode_row(row: dict[str, Any], kinds: dict[str, str]) -> str:
    """One JSON line (no newline) for a row read from the database."""
    encoded: dict[str, Any] = {}
    for name, kind in kinds.items():
        value = row[name]
        if value is None:
            encoded[name] = None
        elif kind == DATETIME:
            # SQLite hands back naive datetimes: tunedeck always stores them in UTC.
            aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
            encoded[name] = aware.astimezone(UTC).isoformat()
        elif kind == BYTES:
            encoded[name] = base64.b64encode(bytes(value)).decode("ascii")
        else:
            encoded[name] = value
    return json.dumps(encoded, ensure_ascii=False, separators=(",", ":"))


def decode_row(line: str, kinds: dict[str, str], *, dialect: str, where: str) -> dict[str, Any]:
    """The column values of one JSON line, ready to insert on `dialect`; BackupError naming `where`."""
    try:
        encoded = json.loads(line)
    except ValueError as error:
        raise BackupError(f"{where}: not a JSON object ({error})") from None
    if not isinstance(encoded, dict) or set(encoded) != set(kinds):
        raise BackupError(f"{where}: expected the columns {sorted(kinds)}")
    row: dict[str, Any] = {}
    for name, kind in kinds.items():
        value = encoded[name]
        try:
            row[name] = None if value is None else _decoded(value, kind, dialect)
        except (ValueError, TypeError) as error:
            raise BackupError(f"{where}: column {name!r}: not a valid {kind} ({error})") from None
    return row


def _decoded(value: Any, kind: str, dialect: str) -> Any:
    if kind == DATETIME:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError("no time zone")
        parsed = parsed.astimezone(UTC)
        # SQLite has no zone: tunedeck stores naive UTC there.
        return parsed.replace(tzinfo=None) if dialect == "sqlite" else parsed
    if kind == BYTES:
        return base64.b64decode(value, validate=True)
    return value
