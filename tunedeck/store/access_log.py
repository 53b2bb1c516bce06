"""The access log: who read which of a user's raw data, how, and when; only its owner (or an admin) lists it.

Reads made through the product on someone's behalf are logged: dataset previews and
downloads, sealed test set reads, export, checkpoint and final-model downloads. A
worker's reads are the owner's own work and are not. Entries are never changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from tunedeck.core.errors import NotFoundError
from tunedeck.store.access import Actor, is_admin
from tunedeck.store.db import Database
from tunedeck.store.models import AccessLogEntry, User
from tunedeck.store.records import Page
from tunedeck.store.types import utcnow

OBJECT_KINDS = ("dataset_version", "test_set", "export", "checkpoint", "final_model")
ACTIONS = ("download", "preview", "read")
VIAS = ("api", "web", "cli")
MAX_PAGE = 200


@dataclass(frozen=True)
class Reader:
    """Who read: a user's id and name (an admin reading another user's object is the reader, not the owner)."""

    id: str
    name: str


@dataclass(frozen=True)
class DataRead:
    """What was read and how: the owner's object, the action and the way in (`api`, `web` or `cli`)."""

    owner_id: str
    object_kind: str
    object_id: str
    object_label: str
    action: str
    via: str
    client_address: str | None = None

    def __post_init__(self) -> None:
        # A typo here would otherwise surface as a database constraint error in the middle of a download.
        for field, value, allowed in (
            ("object_kind", self.object_kind, OBJECT_KINDS),
            ("action", self.action, ACTIONS),
            ("via", self.via, VIAS),
        ):
            if value not in allowed:
                raise ValueError(f"{field} {value!r}: expected one of {', '.join(allowed)}")


def add_access_entry(session: Session, reader: Reader, read: DataRead) -> AccessLogEntry:
    """Add one entry to the log inside the caller's transaction (so it is written with the read it records)."""
    entry = AccessLogEntry(
        owner_id=read.owner_id,
        reader_id=reader.id,
        reader_name=reader.name[:100],
        object_kind=read.object_kind,
        object_id=read.object_id[:200],
        object_label=read.object_label[:300],
        action=read.action,
        via=read.via,
        client_address=(read.client_address or None) and read.client_address[:64],
        at=utcnow(),
    )
    session.add(entry)
    return entry


class AccessLogRepository:
    """Append to the access log and list one owner's entries."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, reader: Reader, read: DataRead) -> AccessLogEntry:
        """Log that `reader` read `read`'s object."""
        with self.db.write() as session:
            return add_access_entry(session, reader, read)

    def list(
        self, actor: Actor, *, owner_id: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> Page[AccessLogEntry]:
        """Reads of `actor`'s data, newest first; an admin may name another `owner_id`.

        Another user's log is NotFoundError for anyone but an admin (and for an unknown owner).
        Pass the returned `next_cursor` as `cursor` for the next page.
        """
        owner = owner_id or actor.id
        limit = max(1, min(limit, MAX_PAGE))
        statement = select(AccessLogEntry).where(AccessLogEntry.owner_id == owner)
        if cursor:
            statement = statement.where(AccessLogEntry.id < int(cursor))
        with self.db.read() as session:
            if owner != actor.id and (not is_admin(actor) or session.get(User, owner) is None):
                raise NotFoundError(f"user {owner!r} not found")
            rows = list(session.scalars(statement.order_by(AccessLogEntry.id.desc()).limit(limit + 1)))
        more = len(rows) > limit
        items = rows[:limit]
        return Page(items=items, next_cursor=str(items[-1].id) if more and items else None)
