"""Work leases: a row per named piece of work, held by one process at a time on one database.

The API uses them so that identical export requests reaching different server
processes (or machines sharing PostgreSQL) build the export once. A lease is
taken by a conditional UPDATE (free when expired or already ours) or, when no
row exists, by an INSERT that the primary key lets only one process win; both
are atomic on SQLite and PostgreSQL without table locks.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, or_, update
from sqlalchemy.exc import IntegrityError

from tunedeck.jobs.db import Database
from tunedeck.jobs.models import WorkLease
from tunedeck.jobs.types import utcnow


class WorkLeaseRepository:
    """Acquire, renew and release named leases; every call is one short transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def try_acquire(self, name: str, holder: str, ttl_s: float, *, now: datetime | None = None) -> bool:
        """Take `name` for `holder` for `ttl_s` seconds; False when another holder's lease is still live."""
        now = now or utcnow()
        until = now + timedelta(seconds=ttl_s)
        with self.db.write() as session:
            taken = session.execute(
                update(WorkLease)
                .where(WorkLease.name == name, or_(WorkLease.expires_at < now, WorkLease.holder == holder))
                .values(holder=holder, expires_at=until)
            )
            if taken.rowcount:  # type: ignore[attr-defined]
                return True
        try:
            with self.db.write() as session:
                session.add(WorkLease(name=name, holder=holder, expires_at=until))
        except IntegrityError:
            return False  # another process inserted the row first
        return True

    def renew(self, name: str, holder: str, ttl_s: float, *, now: datetime | None = None) -> bool:
        """Extend `holder`'s lease on `name`; False when it no longer holds it (it lapsed and was taken)."""
        until = (now or utcnow()) + timedelta(seconds=ttl_s)
        with self.db.write() as session:
            renewed = session.execute(
                update(WorkLease).where(WorkLease.name == name, WorkLease.holder == holder).values(expires_at=until)
            )
            return bool(renewed.rowcount)  # type: ignore[attr-defined]

    def release(self, name: str, holder: str) -> bool:
        """Give `name` up; False (and nothing changed) when `holder` no longer holds it."""
        with self.db.write() as session:
            released = session.execute(delete(WorkLease).where(WorkLease.name == name, WorkLease.holder == holder))
            return bool(released.rowcount)  # type: ignore[attr-defined]

    def holder_of(self, name: str) -> tuple[str, datetime] | None:
        """The holder of `name` and when its lease ends, or None when nobody holds it."""
        with self.db.read() as session:
            lease = session.get(WorkLease, name)
            return None if lease is None else (lease.holder, lease.expires_at)
