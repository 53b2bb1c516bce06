"""The one work queue: a job's training, exports, preflights, inspections, generations and ingestions.

The API only records a request here and answers at once; a worker that can run
the kind claims it and reports its progress and its result. A claim takes the
item in priority order (high first), then first in, first out, with a lease and a
fresh fencing token in one write transaction (`BEGIN IMMEDIATE` on SQLite, `FOR
UPDATE SKIP LOCKED` on PostgreSQL); every later change is conditional on the token;
an item whose worker stopped heartbeating goes back to the queue until
`max_attempts` claims, then fails.

A `train` item is a job's place in the queue: claiming it starts the job's attempt
in the same transaction, and the job's own rules (pause, cancel, attempts since its
last resume) decide what happens to it afterwards (`queue.py`, `job_attempts.py`).

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

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError

from tunedeck.core.errors import StateTransitionError
from tunedeck.core.ids import new_id
from tunedeck.core.states import WorkKind, WorkState
from tunedeck.jobs.access import Actor, get_owned, scoped
from tunedeck.jobs.db import Database
from tunedeck.jobs.fencing import TRAIN, new_fencing_token, token_sha256
from tunedeck.jobs.job_attempts import start_attempt
from tunedeck.jobs.models import WorkItem
from tunedeck.jobs.quotas import QuotaRepository
from tunedeck.jobs.records import ClaimedJob
from tunedeck.jobs.types import utcnow
from tunedeck.jobs.work_item_moves import end_item, held_item, requeue_item

# Kinds a worker runs in its work slots, beside the jobs (`train` items) it trains.
WORK_KINDS = tuple(kind.value for kind in WorkKind if kind is not WorkKind.TRAIN)
# States in which an identical request reuses the item.
_REUSABLE = (WorkState.QUEUED.value, WorkState.RUNNING.value, WorkState.SUCCEEDED.value)


def dedup_key(kind: str, identity: Mapping[str, Any]) -> str:
    """The hash of a kind and the inputs that define its work (canonical JSON)."""
    canonical = json.dumps({"kind": kind, "identity": identity}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def new_work_item(
    owner_id: str,
    kind: str,
    inputs: Mapping[str, Any],
    max_attempts: int,
    *,
    dedup: str | None = None,
    job_id: str | None = None,
    devices_needed: int = 0,
) -> WorkItem:
    """A queued item not yet added to a session (callers that write other rows with it add it themselves)."""
    now = utcnow()
    return WorkItem(
        id=new_id("wi_"),
        owner_id=owner_id,
        kind=kind,
        state=WorkState.QUEUED.value,
        inputs=dict(inputs),
        dedup_key=dedup,
        job_id=job_id,
        devices_needed=devices_needed,
        progress={},
        max_attempts=max_attempts,
        attempt=0,
        created_at=now,
        updated_at=now,
    )


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
    job: ClaimedJob | None = None  # the attempt a `train` item started


class WorkItemRepository:
    """Submit, read and cancel work items (people); claim, beat, report and finish them (workers)."""

    def __init__(self, db: Database, quotas: QuotaRepository, *, default_max_attempts: int = 3) -> None:
        self.db = db
        self.quotas = quotas
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
        item = new_work_item(
            actor.id, kind, inputs, self.default_max_attempts, dedup=key, job_id=job_id, devices_needed=devices_needed
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

    def list_items(
        self, actor: Actor, *, job_id: str | None = None, kinds: Iterable[str] | None = None, limit: int = 50
    ) -> list[WorkItem]:
        """`actor`'s items, newest first, optionally those of one job or of some kinds."""
        statement = scoped(select(WorkItem), WorkItem.owner_id, actor)
        if job_id is not None:
            statement = statement.where(WorkItem.job_id == job_id)
        if kinds is not None:
            statement = statement.where(WorkItem.kind.in_(list(kinds)))
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
        """Cancel a queued or running item (a running one's worker stops at its next heartbeat).

        An ended item is returned as it is. A `train` item follows its job: while it waits or
        runs, StateTransitionError names the job to cancel instead.
        """
        with self.db.write() as session:
            item = get_owned(session, WorkItem, item_id, actor, "work item", for_update=True)
            if item.kind == TRAIN and not WorkState(item.state).is_terminal:
                raise StateTransitionError(
                    f"work item {item_id!r} is the training of job {item.job_id!r}: cancel the job "
                    f"(POST /api/v1/jobs/{item.job_id}/cancel), which keeps its checkpoints"
                )
            if item.kind == WorkKind.DELETE.value and not WorkState(item.state).is_terminal:
                # Its rows are gone already: stopping halfway would only leave copies nobody can reach.
                raise StateTransitionError(
                    f"work item {item_id!r} removes what a deletion left behind: it cannot be cancelled"
                )
            if not WorkState(item.state).is_terminal:
                end_item(item, WorkState.CANCELLED, utcnow(), error={"detail": "cancelled by its owner", "status": 409})
            return item

    # Workers' side.

    def claim(
        self,
        worker_id: str,
        kinds: Iterable[str],
        devices: int,
        lease_s: float,
        *,
        now: datetime | None = None,
        skip_owners: frozenset[str] = frozenset(),
        machines: int = 1,
    ) -> ClaimedWork | None:
        """Take the next queued item of `kinds` that needs at most `devices` accelerators, or None.

        Items spanning more machines than `machines` (what the worker reaches: 1, or a Ray
        cluster's nodes) are left for a worker that reaches them.

        A `train` item starts its job's attempt (`ClaimedWork.job`). Its owner's jobs wait
        while they are at a running-jobs or device-hours limit, or named in `skip_owners`
        (the caller found them at their storage limit); the next owner's item is taken.
        """
        now = now or utcnow()
        token, digest = new_fencing_token()
        with self.db.write() as session:
            waiting = set(skip_owners)
            while True:
                statement = select(WorkItem).where(
                    WorkItem.state == WorkState.QUEUED.value,
                    WorkItem.kind.in_(list(kinds)),
                    WorkItem.devices_needed <= devices,
                    WorkItem.machines_needed <= machines,
                )
                if waiting:
                    statement = statement.where(or_(WorkItem.kind != TRAIN, WorkItem.owner_id.not_in(waiting)))
                item = session.scalars(
                    statement.order_by(WorkItem.priority.desc(), WorkItem.created_at, WorkItem.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                ).one_or_none()
                if item is None:
                    return None
                if item.kind != TRAIN or self.quotas.claim_refusal(session, item.owner_id, now) is None:
                    break
                waiting.add(item.owner_id)
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
                job=start_attempt(session, item, token, now) if item.kind == TRAIN else None,
            )

    def heartbeat(self, item_id: str, token: str, lease_s: float, *, now: datetime | None = None) -> bool:
        """Extend the lease while `token` holds the item; False (stop, write nothing) once it does not."""
        now = now or utcnow()
        with self.db.write() as session:
            item = held_item(session, item_id, token)
            if item is None:
                return False
            item.lease_until = now + timedelta(seconds=lease_s)
            return True

    def report_progress(self, item_id: str, token: str, progress: Mapping[str, Any]) -> bool:
        """Record what the item is doing (`phase`, and `done`/`total` where counted); False when the token is stale."""
        with self.db.write() as session:
            item = held_item(session, item_id, token)
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
            item = held_item(session, item_id, token)
            if item is None:
                return False
            end_item(item, WorkState.SUCCEEDED, utcnow(), result=dict(result))
            return True

    def fail(self, item_id: str, token: str, error: Mapping[str, Any]) -> bool:
        """End the item with its error (`detail`, `status`, `issues`); False when the token is stale."""
        with self.db.write() as session:
            item = held_item(session, item_id, token)
            if item is None:
                return False
            end_item(item, WorkState.FAILED, utcnow(), error=dict(error))
            return True

    def release(self, item_id: str, token: str) -> bool:
        """Give a held item back to the queue (the worker is shutting down); False when the token is stale."""
        with self.db.write() as session:
            item = held_item(session, item_id, token)
            if item is None:
                return False
            requeue_item(item, utcnow())
            return True

    def requeue_expired(self, *, now: datetime | None = None) -> list[tuple[str, WorkState]]:
        """Take back every running item whose lease ended; it is queued again, or fails after `max_attempts`.

        `train` items are left to their jobs' rules (`JobQueue.requeue_expired`).
        """
        now = now or utcnow()
        moved: list[tuple[str, WorkState]] = []
        with self.db.write() as session:
            expired = session.scalars(
                select(WorkItem)
                .where(WorkItem.kind != TRAIN, WorkItem.state == WorkState.RUNNING.value, WorkItem.lease_until < now)
                .order_by(WorkItem.id)
                .with_for_update(skip_locked=True)
            ).all()
            for item in expired:
                if item.attempt >= item.max_attempts:
                    detail = (
                        f"the worker stopped heartbeating {item.attempt} times (max_attempts={item.max_attempts}); "
                        f"last worker {item.worker_id!r}"
                    )
                    end_item(item, WorkState.FAILED, now, error={"detail": detail, "status": 503})
                    moved.append((item.id, WorkState.FAILED))
                else:
                    requeue_item(item, now)
                    moved.append((item.id, WorkState.QUEUED))
        return moved

    def _reusable(self, kind: str, key: str) -> WorkItem | None:
        with self.db.read() as session:
            return session.scalars(
                select(WorkItem).where(WorkItem.kind == kind, WorkItem.dedup_key == key, WorkItem.state.in_(_REUSABLE))
            ).one_or_none()
