"""The one work queue over the `work_items` table: claim, heartbeat, finish, release, cancel, lease expiry.

Every kind of work waits here: a job's training (`train`), exports, preflights, inspections,
generations, ingestions, deletions. A claim takes the item of the asked kinds in priority order
(high first), then first in, first out, with a lease and a fresh fencing token in one write
transaction (`BEGIN IMMEDIATE` on SQLite; `SELECT ... FOR UPDATE SKIP LOCKED` on PostgreSQL, so
concurrent claimers pick different items without waiting on each other); every later change is
conditional on the token. Leases that ran out are taken back by one pass over every kind.

What is particular to a kind is the policy it registers (`kind_policy.py`): the `train` kind's
(`train_policy.py`) starts the job's attempt at the claim and moves the job by its rules when
the worker lets go; kinds without a policy of their own follow `ItemPolicy`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from tunedeck.core.errors import StateTransitionError
from tunedeck.core.states import WorkState
from tunedeck.store.access import Actor, get_owned
from tunedeck.store.db import Database
from tunedeck.store.fencing import new_fencing_token, token_sha256
from tunedeck.store.kind_policy import ItemPolicy, KindPolicy
from tunedeck.store.models import FencingLog, WorkItem
from tunedeck.store.records import ClaimedJob, Heartbeat
from tunedeck.store.types import utcnow
from tunedeck.store.work_item_moves import end_item, held_item


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


class WorkQueue:
    """Claim, heartbeat, finish, release and cancel work items of every kind; take back expired leases."""

    def __init__(self, db: Database, *, default_policy: KindPolicy | None = None) -> None:
        self.db = db
        self._default: KindPolicy = default_policy or ItemPolicy()
        self._policies: dict[str, KindPolicy] = {}

    def register(self, kind: str, policy: KindPolicy) -> None:
        """Give `kind` its own rules; ValueError when it has some already."""
        if kind in self._policies:
            raise ValueError(f"work kind {kind!r} already has a policy")
        self._policies[kind] = policy

    def policy_for(self, kind: str) -> KindPolicy:
        """The rules `kind` registered, or the default rules of plain items."""
        return self._policies.get(kind, self._default)

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

        The item becomes `running` with `worker_id`, a lease of `lease_s` seconds, `attempt + 1`
        and a new fencing token (returned once). Items spanning more machines than `machines`
        (what the worker reaches: 1, or a Ray cluster's nodes) are left for a worker that reaches
        them. Items of owner-limited kinds (`train`) wait while their owner is at a limit, or is
        named in `skip_owners` (the caller found them at their storage limit); the next owner's
        item is taken. The kind's policy starts what the item stands for (`ClaimedWork.job`).
        """
        now = now or utcnow()
        token, digest = new_fencing_token()
        with self.db.write() as session:
            item = self._next_claimable(session, list(kinds), devices, machines, set(skip_owners), now)
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
                job=self.policy_for(item.kind).on_claim(session, item, token, now),
            )

    def _next_claimable(
        self, session: Session, kinds: list[str], devices: int, machines: int, waiting: set[str], now: datetime
    ) -> WorkItem | None:
        """The first queued item that fits, locked; owners found at a limit on the way join `waiting`."""
        limited = [kind for kind in kinds if self.policy_for(kind).owner_limited]
        while True:
            statement = select(WorkItem).where(
                WorkItem.state == WorkState.QUEUED.value,
                WorkItem.kind.in_(kinds),
                WorkItem.devices_needed <= devices,
                WorkItem.machines_needed <= machines,
            )
            if waiting and limited:
                statement = statement.where(or_(WorkItem.kind.not_in(limited), WorkItem.owner_id.not_in(waiting)))
            item = session.scalars(
                statement.order_by(WorkItem.priority.desc(), WorkItem.created_at, WorkItem.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            ).one_or_none()
            if item is None or self.policy_for(item.kind).refusal_to_claim(session, item.owner_id, now) is None:
                return item
            waiting.add(item.owner_id)

    def _held(self, session: Session, item_id: str, token: str) -> tuple[WorkItem, KindPolicy] | None:
        """The item `token` holds, locked, with its kind's policy; None when the token is stale."""
        item = held_item(session, item_id, token)
        if item is None:
            return None
        policy = self.policy_for(item.kind)
        return (item, policy) if policy.holds(session, item) else None

    def heartbeat(self, item_id: str, token: str, lease_s: float, *, now: datetime | None = None) -> Heartbeat:
        """Extend the lease while `token` holds the item; falsy (and no change) when the token is stale.

        A job's answer carries its state and any action a person requested (`pause` or `cancel`).
        """
        now = now or utcnow()
        with self.db.write() as session:
            held = self._held(session, item_id, token)
            if held is None:
                return Heartbeat(ok=False)
            item, policy = held
            item.lease_until = now + timedelta(seconds=lease_s)
            return policy.on_heartbeat(session, item)

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

    def finish(self, item_id: str, token: str, end: object, *, now: datetime | None = None) -> bool:
        """End the worker's hold as `end` says (`ItemEnd`, or `JobEnd` for a job); False when the token is stale.

        StateTransitionError when a job's state machine forbids the move (e.g. paused while not pausing).
        """
        now = now or utcnow()
        with self.db.write() as session:
            held = self._held(session, item_id, token)
            if held is None:
                return False
            item, policy = held
            policy.on_finish(session, item, end, now)
            return True

    def release(self, item_id: str, token: str, *, now: datetime | None = None) -> str | None:
        """Give a held item back (the worker is shutting down); the state it went to, None when the token is stale.

        The item goes back to its place in line; a job goes to `paused` / `cancelled` when a person asked.
        """
        now = now or utcnow()
        with self.db.write() as session:
            held = self._held(session, item_id, token)
            if held is None:
                return None
            item, policy = held
            return policy.on_release(session, item, now)

    def requeue_expired(self, *, now: datetime | None = None) -> list[tuple[str, str]]:
        """Take back every running item whose lease ended before `now`; returns (item id, new state) pairs.

        The kind's policy says where the item goes: back in line until its attempts are spent, then failed
        (a job's state, for a `train` item).
        """
        now = now or utcnow()
        moved: list[tuple[str, str]] = []
        with self.db.write() as session:
            expired = session.scalars(
                select(WorkItem)
                .where(WorkItem.state == WorkState.RUNNING.value, WorkItem.lease_until < now)
                .order_by(WorkItem.id)
                .with_for_update(skip_locked=True)
            ).all()
            for item in expired:
                state = self.policy_for(item.kind).on_lease_lost(session, item, now)
                if state is not None:
                    moved.append((item.id, state))
        return moved

    def cancel(self, actor: Actor, item_id: str) -> WorkItem:
        """Cancel a queued or running item of `actor` (a running one's worker stops at its next heartbeat).

        An ended item is returned as it is. StateTransitionError when the kind's policy refuses
        (a `train` item follows its job; a deletion's clean-up runs to its end).
        """
        with self.db.write() as session:
            item = get_owned(session, WorkItem, item_id, actor, "work item", for_update=True)
            if WorkState(item.state).is_terminal:
                return item
            refusal = self.policy_for(item.kind).refusal_to_cancel(item)
            if refusal is not None:
                raise StateTransitionError(refusal)
            end_item(item, WorkState.CANCELLED, utcnow(), error={"detail": "cancelled by its owner", "status": 409})
            return item

    def lease_until(self, item_id: str) -> datetime | None:
        """When the lease of a running item ends; None while no worker holds it."""
        with self.db.read() as session:
            return session.scalar(
                select(WorkItem.lease_until).where(WorkItem.id == item_id, WorkItem.state == WorkState.RUNNING.value)
            )

    def fencing_log(self, job_id: str) -> list[FencingLog]:
        """Every claim of a job, oldest first: who held it, with which token hash, from when to when."""
        with self.db.read() as session:
            return list(
                session.scalars(
                    select(FencingLog).where(FencingLog.job_id == job_id).order_by(FencingLog.attempt, FencingLog.id)
                )
            )
