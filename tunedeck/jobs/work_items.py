"""Work items: model work other than training (export, preflight, inspection, generation), queued for workers.

The API only records a request here and answers at once; a worker that can run
the kind claims it and reports its progress and its result. The guarantees are
the job queue's: a claim takes the item with a lease and a fresh fencing token in
one write transaction (`BEGIN IMMEDIATE` on SQLite, `FOR UPDATE SKIP LOCKED` on
PostgreSQL); every later change is conditional on the token; an item whose worker
stopped heartbeating goes back to the queue until `max_attempts` claims, then fails.

Identical requests (same kind, same inputs that define the work) share one item:
`submit` finds the queued, running or succeeded item with the same `dedup_key`
instead of adding one, in every process on the database, because the key is unique.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tunedeck.core.ids import new_id
from tunedeck.core.states import WorkState
from tunedeck.jobs.access import Actor, get_owned, scoped
from tunedeck.jobs.db import Database
from tunedeck.jobs.fencing import new_fencing_token, token_sha256
from tunedeck.jobs.models import WorkItem
from tunedeck.jobs.types import utcnow

WORK_KINDS = ("export", "preflight", "inspect", "generate", "ingest")
# States in which an identical request reuses the item.
_REUSABLE = (WorkState.QUEUED.value, WorkState.RUNNING.value, WorkState.SUCCEEDED.value)


def dedup_key(kind: str, identity: Mapping[str, Any]) -> str:
    """The hash of a kind and the inputs that define its work (canonical JSON)."""
    canonical = json.dumps({"kind": kind, "identity": identity}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ClaimedWork:
    """What a worker gets from a claim: the item to run and the token every later call needs."""

    item_id: str
    owner_id: str
    kind: str
    inputs: dict[str, Any]
    job_id: str | None
    devices_needed: int
    attempt: int
    fencing_token: str = field(repr=False)


class WorkItemRepository:
    """Submit, read and cancel work items (people); claim, beat, report and finish them (workers)."""

    def __init__(self, db: Database, *, default_max_attempts: int = 3) -> None:
        self.db = db
        self.default_max_attempts = default_max_attempts

    # People's side.

    def submit(
        self,
        actor: Actor,
        kind: str,
        inputs: Mapping[str, Any],
        *,
        identity: Mapping[str, Any] | None = None,
        job_id: str | None = None,
        devices_needed: int = 0,
    ) -> tuple[WorkItem, bool]:
        """Queue a work item, or find the identical one; returns (item, created).

        `identity` is what makes two requests the same work (None: every request is new).
        """
        if kind not in WORK_KINDS:
            raise ValueError(f"unknown work kind {kind!r}; expected one of {WORK_KINDS}")
        key = dedup_key(kind, identity) if identity is not None else None
        if key is not None and (existing := self._reusable(kind, key)) is not None:
            return existing, False
        now = utcnow()
        item = WorkItem(
            id=new_id("wi_"),
            owner_id=actor.id,
            kind=kind,
            state=WorkState.QUEUED.value,
            inputs=dict(inputs),
            dedup_key=key,
            job_id=job_id,
            devices_needed=devices_needed,
            progress={},
            max_attempts=self.default_max_attempts,
            attempt=0,
            created_at=now,
            updated_at=now,
        )
        try:
            with self.db.write() as session:
                session.add(item)
        except IntegrityError:
            # Another request (maybe in another server process) queued the same work first.
            assert key is not None
            existing = self._reusable(kind, key)
            if existing is None:
                raise
            return existing, False
        return item, True

    def get(self, actor: Actor, item_id: str) -> WorkItem:
        """One item; NotFoundError when absent or not `actor`'s."""
        with self.db.read() as session:
            return get_owned(session, WorkItem, item_id, actor, "work item")

    def list_items(self, actor: Actor, *, job_id: str | None = None, limit: int = 50) -> list[WorkItem]:
        """`actor`'s items, newest first, optionally those of one job."""
        statement = scoped(select(WorkItem), WorkItem.owner_id, actor)
        if job_id is not None:
            statement = statement.where(WorkItem.job_id == job_id)
        with self.db.read() as session:
            return list(session.scalars(statement.order_by(WorkItem.id.desc()).limit(max(1, min(limit, 200)))))

    def pending_count(self, owner_id: str, kinds: Iterable[str]) -> int:
        """How many items of these kinds `owner_id` has queued or running."""
        with self.db.read() as session:
            rows = session.scalars(
                select(WorkItem.id).where(
                    WorkItem.owner_id == owner_id,
                    WorkItem.kind.in_(list(kinds)),
                    WorkItem.state.in_([WorkState.QUEUED.value, WorkState.RUNNING.value]),
                )
            ).all()
        return len(rows)

    def cancel(self, actor: Actor, item_id: str) -> WorkItem:
        """Cancel a queued or running item (a running one's worker stops at its next heartbeat)."""
        with self.db.write() as session:
            item = get_owned(session, WorkItem, item_id, actor, "work item", for_update=True)
            if not WorkState(item.state).is_terminal:
                _end(item, WorkState.CANCELLED, utcnow(), error={"detail": "cancelled by its owner", "status": 409})
            return item

    # Workers' side.

    def claim(
        self, worker_id: str, kinds: Iterable[str], devices: int, lease_s: float, *, now: datetime | None = None
    ) -> ClaimedWork | None:
        """Take the oldest queued item of `kinds` that needs at most `devices` accelerators, or None."""
        now = now or utcnow()
        token, digest = new_fencing_token()
        with self.db.write() as session:
            item = session.scalars(
                select(WorkItem)
                .where(
                    WorkItem.state == WorkState.QUEUED.value,
                    WorkItem.kind.in_(list(kinds)),
                    WorkItem.devices_needed <= devices,
                )
                .order_by(WorkItem.created_at, WorkItem.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            ).one_or_none()
            if item is None:
                return None
            item.state = WorkState.RUNNING.value
            item.worker_id = worker_id
            item.lease_until = now + timedelta(seconds=lease_s)
            item.attempt += 1
            item.fencing_sha256 = digest
            item.started_at = item.started_at or now
            item.updated_at = now
            return ClaimedWork(
                item_id=item.id,
                owner_id=item.owner_id,
                kind=item.kind,
                inputs=dict(item.inputs),
                job_id=item.job_id,
                devices_needed=item.devices_needed,
                attempt=item.attempt,
                fencing_token=token,
            )

    def heartbeat(self, item_id: str, token: str, lease_s: float, *, now: datetime | None = None) -> bool:
        """Extend the lease while `token` holds the item; False (stop, write nothing) once it does not."""
        now = now or utcnow()
        with self.db.write() as session:
            item = _held(session, item_id, token)
            if item is None:
                return False
            item.lease_until = now + timedelta(seconds=lease_s)
            return True

    def report_progress(self, item_id: str, token: str, progress: Mapping[str, Any]) -> bool:
        """Record what the item is doing (`phase`, and `done`/`total` where counted); False when the token is stale."""
        with self.db.write() as session:
            item = _held(session, item_id, token)
            if item is None:
                return False
            item.progress = dict(progress)
            item.updated_at = utcnow()
            return True

    def still_held(self, item_id: str, token: str) -> bool:
        """Whether `token` still holds the item: checked before anything is committed to storage."""
        with self.db.read() as session:
            return (
                session.scalars(
                    select(WorkItem.id).where(
                        WorkItem.id == item_id,
                        WorkItem.fencing_sha256 == token_sha256(token),
                        WorkItem.state == WorkState.RUNNING.value,
                    )
                ).one_or_none()
                is not None
            )

    def succeed(self, item_id: str, token: str, result: Mapping[str, Any]) -> bool:
        """End the item with its result; False (nothing changed) when the token is stale."""
        with self.db.write() as session:
            item = _held(session, item_id, token)
            if item is None:
                return False
            _end(item, WorkState.SUCCEEDED, utcnow(), result=dict(result))
            return True

    def fail(self, item_id: str, token: str, error: Mapping[str, Any]) -> bool:
        """End the item with its error (`detail`, `status`, `issues`); False when the token is stale."""
        with self.db.write() as session:
            item = _held(session, item_id, token)
            if item is None:
                return False
            _end(item, WorkState.FAILED, utcnow(), error=dict(error))
            return True

    def release(self, item_id: str, token: str) -> bool:
        """Give a held item back to the queue (the worker is shutting down); False when the token is stale."""
        with self.db.write() as session:
            item = _held(session, item_id, token)
            if item is None:
                return False
            _requeue(item, utcnow())
            return True

    def requeue_expired(self, *, now: datetime | None = None) -> list[tuple[str, WorkState]]:
        """Take back every running item whose lease ended; it is queued again, or fails after `max_attempts`."""
        now = now or utcnow()
        moved: list[tuple[str, WorkState]] = []
        with self.db.write() as session:
            expired = session.scalars(
                select(WorkItem)
                .where(WorkItem.state == WorkState.RUNNING.value, WorkItem.lease_until < now)
                .order_by(WorkItem.id)
                .with_for_update(skip_locked=True)
            ).all()
            for item in expired:
                if item.attempt >= item.max_attempts:
                    detail = (
                        f"the worker stopped heartbeating {item.attempt} times (max_attempts={item.max_attempts}); "
                        f"last worker {item.worker_id!r}"
                    )
                    _end(item, WorkState.FAILED, now, error={"detail": detail, "status": 503})
                    moved.append((item.id, WorkState.FAILED))
                else:
                    _requeue(item, now)
                    moved.append((item.id, WorkState.QUEUED))
        return moved

    def _reusable(self, kind: str, key: str) -> WorkItem | None:
        with self.db.read() as session:
            return session.scalars(
                select(WorkItem).where(
                    WorkItem.kind == kind, WorkItem.dedup_key == key, WorkItem.state.in_(_REUSABLE)
                )
            ).one_or_none()


def _held(session: Session, item_id: str, token: str) -> WorkItem | None:
    """The running item, locked for update, if `token` is its current fencing token; else None."""
    return session.scalars(
        select(WorkItem)
        .where(
            WorkItem.id == item_id,
            WorkItem.fencing_sha256 == token_sha256(token),
            WorkItem.state == WorkState.RUNNING.value,
        )
        .with_for_update()
    ).one_or_none()


def _requeue(item: WorkItem, now: datetime) -> None:
    item.state = WorkState.QUEUED.value
    item.worker_id = None
    item.lease_until = None
    item.fencing_sha256 = None
    item.progress = {}
    item.updated_at = now


def _end(
    item: WorkItem,
    state: WorkState,
    now: datetime,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> None:
    item.state = state.value
    item.result = result
    item.error = error
    item.lease_until = None
    item.fencing_sha256 = None
    item.finished_at = now
    item.updated_at = now
    if state is not WorkState.SUCCEEDED:
        item.dedup_key = None  # a failed or cancelled item lets the same request be tried again
