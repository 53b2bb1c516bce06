"""What is particular to one kind of work item, as hooks the one work queue calls (`work_queue.py`).

The queue owns the verbs (claim, heartbeat, finish, release, cancel, lease expiry) and the
row changes common to every kind; a kind's policy decides what a claim starts, what a
worker may end the item as, and where the item goes when its worker lets go or vanishes.
Kinds with no policy of their own follow `ItemPolicy`: finish with a result or an error,
back in line when released, and, when the lease expires, back in line until the item's
claims reach its `max_attempts`, then failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.orm import Session

from tunedeck.core.states import WorkState
from tunedeck.store.models import WorkItem
from tunedeck.store.records import ClaimedJob, Heartbeat
from tunedeck.store.work_item_moves import end_item, requeue_item


class KindPolicy(Protocol):
    """The hooks a kind registers with the queue; each runs inside the queue's write transaction.

    The queue has already checked (and locked) the item held by the caller's fencing token
    before `holds`, `on_heartbeat`, `on_finish` and `on_release` run, and changes the item's
    lease itself; the hooks change what the kind owns (a job's row) and where the item goes.
    """

    # Whether owners' running-jobs and spending limits (and the caller's `skip_owners`) hold its items back.
    owner_limited: bool

    def refusal_to_claim(self, session: Session, owner_id: str, now: datetime) -> str | None:
        """Why a worker may not start an item of `owner_id` now (a limit and its use), or None."""
        ...

    def on_claim(self, session: Session, item: WorkItem, token: str, now: datetime) -> ClaimedJob | None:
        """Start what the claimed item stands for (the item already carries the claim); its job's attempt or None."""
        ...

    def holds(self, session: Session, item: WorkItem) -> bool:
        """Whether the token that holds the item still holds the work (a train item's job may have moved on)."""
        ...

    def on_heartbeat(self, session: Session, item: WorkItem) -> Heartbeat:
        """The answer to a beat that extended the lease (with any action a person requested)."""
        ...

    def on_finish(self, session: Session, item: WorkItem, end: Any, now: datetime) -> None:
        """End the held item as `end` says (TypeError for an end the kind does not know)."""
        ...

    def on_release(self, session: Session, item: WorkItem, now: datetime) -> str:
        """The worker gives the item back (shutting down): move it, and return the state it went to."""
        ...

    def on_lease_lost(self, session: Session, item: WorkItem, now: datetime) -> str | None:
        """The worker stopped heartbeating: move the item, return its new state (None: nothing to report)."""
        ...

    def refusal_to_cancel(self, item: WorkItem) -> str | None:
        """Why its owner may not cancel the queued or running item, or None."""
        ...


@dataclass(frozen=True)
class ItemEnd:
    """How a worker ends a plain item: succeeded with its result, or failed with its error."""

    state: WorkState
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @classmethod
    def succeeded(cls, result: dict[str, Any]) -> ItemEnd:
        """The item's work is done: `result` is what its requester reads."""
        return cls(WorkState.SUCCEEDED, result=dict(result))

    @classmethod
    def failed(cls, error: dict[str, Any]) -> ItemEnd:
        """The item's work failed: `error` has a `detail`, a `status` and, where located, `issues`."""
        return cls(WorkState.FAILED, error=dict(error))


class ItemPolicy:
    """The rules of a kind with nothing of its own: one claim, one result; `max_attempts` lost leases, then failed."""

    owner_limited = False

    def __init__(self, *, cancel_refusal: str | None = None) -> None:
        # Said to an owner who tries to cancel an item that must run to its end (`{item_id}` is filled in).
        self.cancel_refusal = cancel_refusal

    def refusal_to_claim(self, session: Session, owner_id: str, now: datetime) -> str | None:
        """Nothing holds a plain item back."""
        return None

    def on_claim(self, session: Session, item: WorkItem, token: str, now: datetime) -> ClaimedJob | None:
        """A plain item starts nothing beside itself."""
        return None

    def holds(self, session: Session, item: WorkItem) -> bool:
        """The item's token is the whole hold."""
        return True

    def on_heartbeat(self, session: Session, item: WorkItem) -> Heartbeat:
        """Only that the lease was extended, and until when."""
        return Heartbeat(ok=True, lease_until=item.lease_until)

    def on_finish(self, session: Session, item: WorkItem, end: Any, now: datetime) -> None:
        """End the item with its result or its error."""
        if not isinstance(end, ItemEnd) or end.state not in (WorkState.SUCCEEDED, WorkState.FAILED):
            raise TypeError(f"a {item.kind} item ends with an ItemEnd, succeeded or failed; got {end!r}")
        end_item(item, end.state, now, result=end.result, error=end.error)

    def on_release(self, session: Session, item: WorkItem, now: datetime) -> str:
        """Back in line, keeping its place."""
        requeue_item(item, now)
        return WorkState.QUEUED

    def on_lease_lost(self, session: Session, item: WorkItem, now: datetime) -> str | None:
        """Back in line, or failed once its claims reached `max_attempts`."""
        if item.attempt < item.max_attempts:
            requeue_item(item, now)
            return WorkState.QUEUED
        detail = (
            f"the worker stopped heartbeating {item.attempt} times (max_attempts={item.max_attempts}); "
            f"last worker {item.worker_id!r}"
        )
        end_item(item, WorkState.FAILED, now, error={"detail": detail, "status": 503})
        return WorkState.FAILED

    def refusal_to_cancel(self, item: WorkItem) -> str | None:
        """The refusal this policy was built with, naming the item (None: cancellable)."""
        return self.cancel_refusal.format(item_id=item.id) if self.cancel_refusal is not None else None
