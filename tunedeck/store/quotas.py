"""Per-user quotas: how many jobs run and wait, how many bytes are stored, how many device-hours are spent.

The operator sets one row for everyone and, where a user differs, a row for
that user (a field left empty there takes everyone's value). Limits are
checked twice: when a job joins the queue (created, cloned or resumed: queued
jobs, stored bytes, device-hours) and when a worker claims it (running jobs,
stored bytes, device-hours), so a user at a limit waits without holding back
anyone else. Stored bytes live in artifact storage, which this layer does not
reach: callers measure them with a function they pass in, and only for users
who have a storage limit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from tunedeck.core.errors import ForbiddenError, NotFoundError
from tunedeck.store.db import Database
from tunedeck.store.fencing import HELD_STATES
from tunedeck.store.models import FencingLog, Job, Quota, User
from tunedeck.store.types import utcnow

EVERYONE = "*"
DEFAULT_PERIOD_DAYS = 30
LIMIT_FIELDS = ("running_jobs", "queued_jobs", "storage_bytes", "device_hours", "period_days")
# Measures the bytes a user keeps in artifact storage.
StorageMeter = Callable[[str], int]


class QuotaExceededError(ForbiddenError):
    """A user is at one of their limits; the message names it, its current use and how an admin raises it."""


@dataclass(frozen=True)
class QuotaLimits:
    """The limits that apply to one user (None: no limit) and the device-hours period in days."""

    running_jobs: int | None = None
    queued_jobs: int | None = None
    storage_bytes: int | None = None
    device_hours: float | None = None
    period_days: int = DEFAULT_PERIOD_DAYS


@dataclass(frozen=True)
class QuotaUse:
    """What one user uses now; `storage_bytes` is None where it was not measured (no storage limit)."""

    running_jobs: int
    queued_jobs: int
    device_hours: float
    storage_bytes: int | None = None


@dataclass(frozen=True)
class QuotaSettings:
    """One quota row as the operator set it: None fields are not set there."""

    subject: str
    running_jobs: int | None = None
    queued_jobs: int | None = None
    storage_bytes: int | None = None
    device_hours: float | None = None
    period_days: int | None = None
    updated_by: str | None = None
    updated_at: datetime | None = None


class QuotaRepository:
    """Read and set quotas, measure use, and refuse what would pass a limit."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def settings(self, subject: str) -> QuotaSettings:
        """The row for `subject` (a user id, or EVERYONE) as set; all fields None when never set."""
        with self.db.read() as session:
            row = session.get(Quota, subject)
            return _settings(subject, row)

    def set(self, subject: str, changes: Mapping[str, Any], *, by: str) -> QuotaSettings:
        """Set the named fields of `subject`'s row (None clears one); the admin's id is recorded."""
        unknown = set(changes) - set(LIMIT_FIELDS)
        if unknown:
            raise ValueError(f"unknown quota fields {sorted(unknown)}; expected some of {list(LIMIT_FIELDS)}")
        with self.db.write() as session:
            if subject != EVERYONE and session.get(User, subject) is None:
                raise NotFoundError(f"user {subject!r} not found")
            row = session.get(Quota, subject, with_for_update=True)
            if row is None:
                row = Quota(subject=subject)
                session.add(row)
            for name, value in changes.items():
                setattr(row, name, value)
            row.updated_by = by
            row.updated_at = utcnow()
            session.flush()
            return _settings(subject, row)

    def limits_for(self, user_id: str) -> QuotaLimits:
        """The limits that apply to `user_id`: their own row, then everyone's, field by field."""
        with self.db.read() as session:
            return _limits(session, user_id)

    def usage(self, user_id: str, *, meter: StorageMeter | None = None, now: datetime | None = None) -> QuotaUse:
        """What `user_id` uses now; stored bytes are measured with `meter` when one is given."""
        now = now or utcnow()
        with self.db.read() as session:
            limits = _limits(session, user_id)
            return QuotaUse(
                running_jobs=_count(session, user_id, HELD_STATES),
                queued_jobs=_count(session, user_id, ("queued",)),
                device_hours=_device_hours(session, user_id, now - timedelta(days=limits.period_days), now),
                storage_bytes=meter(user_id) if meter is not None else None,
            )

    def refuse_to_queue(
        self, session: Session, user_id: str, stored_bytes: int | None, *, now: datetime | None = None
    ) -> None:
        """QuotaExceededError when one more queued job would pass a limit of `user_id`.

        Runs inside the write transaction that queues the job, with the user's row
        locked, so two requests at once cannot both take the last place.
        `stored_bytes` is the user's measured storage (None: not measured).
        """
        now = now or utcnow()
        user = session.get(User, user_id, with_for_update=True)
        if user is None:
            raise NotFoundError(f"user {user_id!r} not found")
        limits = _limits(session, user_id)
        queued = _count(session, user_id, ("queued",))
        if limits.queued_jobs is not None and queued + 1 > limits.queued_jobs:
            raise _exceeded(user.name, "queued jobs", f"{queued} of {limits.queued_jobs} waiting", "--queued-jobs N")
        reason = _spending_refusal(session, user_id, limits, stored_bytes, now)
        if reason is not None:
            raise _exceeded(user.name, *reason)

    def refuse_to_store(self, user_id: str, stored_bytes: int, adding: int) -> None:
        """QuotaExceededError when storing `adding` more bytes would take `user_id` past their storage limit."""
        with self.db.read() as session:
            limit = _limits(session, user_id).storage_bytes
            if limit is None or stored_bytes + adding <= limit:
                return
            user = session.get(User, user_id)
            name = user.name if user is not None else user_id
        use = f"{stored_bytes} of {limit} in use, {adding} more asked"
        raise _exceeded(name, "stored bytes", use, "--storage-gb N")

    def refusal_to_claim(self, session: Session, owner_id: str, now: datetime) -> str | None:
        """Why a worker may not start a job of `owner_id` now (a limit and its use), or None."""
        limits = _limits(session, owner_id)
        running = _count(session, owner_id, HELD_STATES)
        if limits.running_jobs is not None and running >= limits.running_jobs:
            return f"running jobs: {running} of {limits.running_jobs} in use"
        reason = _spending_refusal(session, owner_id, limits, None, now)
        return None if reason is None else f"{reason[0]}: {reason[1]}"

    def owners_over_storage(self, meter: StorageMeter) -> frozenset[str]:
        """Owners of queued jobs who store at least their storage limit (measured only for those with one)."""
        with self.db.read() as session:
            owners = session.scalars(select(Job.owner_id).where(Job.state == "queued").distinct()).all()
            limited = {owner: _limits(session, owner).storage_bytes for owner in owners}
        return frozenset(owner for owner, limit in limited.items() if limit is not None and meter(owner) >= limit)

    def waiting_reason(self, owner_id: str, meter: StorageMeter, *, now: datetime | None = None) -> str | None:
        """Why a queued job of `owner_id` is not being started: the limit it waits on, or None."""
        now = now or utcnow()
        with self.db.read() as session:
            limits = _limits(session, owner_id)
            stored = meter(owner_id) if limits.storage_bytes is not None else None
            if stored is not None and limits.storage_bytes is not None and stored >= limits.storage_bytes:
                return f"stored bytes: {stored} of {limits.storage_bytes} in use"
            return self.refusal_to_claim(session, owner_id, now)


def _settings(subject: str, row: Quota | None) -> QuotaSettings:
    if row is None:
        return QuotaSettings(subject=subject)
    return QuotaSettings(
        subject=subject,
        **{name: getattr(row, name) for name in LIMIT_FIELDS},
        updated_by=row.updated_by,
        updated_at=row.updated_at,
    )


def _limits(session: Session, user_id: str) -> QuotaLimits:
    rows = {row.subject: row for row in session.scalars(select(Quota).where(Quota.subject.in_([user_id, EVERYONE])))}
    merged: dict[str, Any] = {}
    for item in fields(QuotaLimits):
        own = getattr(rows.get(user_id), item.name, None)
        everyone = getattr(rows.get(EVERYONE), item.name, None)
        value = own if own is not None else everyone
        if value is not None:
            merged[item.name] = value
    return QuotaLimits(**merged)


def _count(session: Session, owner_id: str, states: tuple[str, ...]) -> int:
    return int(session.scalar(select(func.count(Job.id)).where(Job.owner_id == owner_id, Job.state.in_(states))) or 0)


def _device_hours(session: Session, owner_id: str, since: datetime, now: datetime) -> float:
    """Device-hours of `owner_id`'s claims that overlap [since, now]; a job on CPU counts as one device."""
    claims = session.execute(
        select(FencingLog.claimed_at, FencingLog.released_at, Job.devices_needed)
        .join(Job, Job.id == FencingLog.job_id)
        .where(Job.owner_id == owner_id, or_(FencingLog.released_at.is_(None), FencingLog.released_at > since))
    ).all()
    seconds = 0.0
    for claimed_at, released_at, devices in claims:
        start = max(claimed_at, since)
        end = min(released_at or now, now)
        if end > start:
            seconds += (end - start).total_seconds() * max(devices, 1)
    return seconds / 3600


def _spending_refusal(
    session: Session, user_id: str, limits: QuotaLimits, stored_bytes: int | None, now: datetime
) -> tuple[str, str, str] | None:
    """(limit, use, CLI option) of the storage or device-hours limit `user_id` has reached, or None."""
    if limits.storage_bytes is not None and stored_bytes is not None and stored_bytes >= limits.storage_bytes:
        return "stored bytes", f"{stored_bytes} of {limits.storage_bytes} in use", "--storage-gb N"
    if limits.device_hours is not None:
        spent = _device_hours(session, user_id, now - timedelta(days=limits.period_days), now)
        if spent >= limits.device_hours:
            use = f"{spent:.2f} of {limits.device_hours:g} used in the last {limits.period_days} days"
            return "device-hours", use, "--device-hours N"
    return None


def _exceeded(user_name: str, limit: str, use: str, option: str) -> QuotaExceededError:
    return QuotaExceededError(
        f"quota reached for {user_name}: {limit} ({use}); an admin can raise it with "
        f"`tunedeck users quota {user_name} {option} --by ADMIN`"
    )
