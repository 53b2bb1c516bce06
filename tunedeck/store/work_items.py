"""Work items as people see them: submit a request, read it, list them; identical requests share one item.

The API only records a request here and answers at once; a worker that can run the kind
claims it from the one work queue (`work_queue.py`), which also holds the items' leases,
fencing tokens, cancellation and ends.

Identical requests (same kind, same inputs that define the work) share one item:
`submit` finds the queued, running or succeeded item with the same `dedup_key`
instead of adding one, in every process on the database, because the key is unique.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from tunedeck.core.ids import new_id
from tunedeck.core.states import WorkKind, WorkState
from tunedeck.store.access import Actor, get_owned, scoped
from tunedeck.store.db import Database
from tunedeck.store.models import WorkItem
from tunedeck.store.types import utcnow

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


class WorkItemRepository:
    """Submit, read and list work items (the queue's verbs are `WorkQueue`'s)."""

    def __init__(self, db: Database, *, default_max_attempts: int = 3) -> None:
        self.db = db
        self.default_max_attempts = default_max_attempts

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

    def _reusable(self, kind: str, key: str) -> WorkItem | None:
        with self.db.read() as session:
            return session.scalars(
                select(WorkItem).where(WorkItem.kind == kind, WorkItem.dedup_key == key, WorkItem.state.in_(_REUSABLE))
            ).one_or_none()
