"""The `train` kind's policy on the one work queue: a job's rules decide what happens to its item.

Claiming a `train` item starts an attempt of its job (attempt + 1, resuming from the newest
committed checkpoint, a row in the fencing log). The item is held only while its job is
running or pausing. When the worker finishes, lets go or disappears, the job moves by its
state machine (a requested cancel or pause first; after a lost lease, failed once its
claims since the last resume reach `max_attempts`) and the item goes back in line or
ends with the job (`job_attempts.py`). Owners at a running-jobs or spending limit wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from tunedeck.core.states import JobState, WorkState
from tunedeck.store.fencing import locked_held_job
from tunedeck.store.job_attempts import let_go, move_job, start_attempt, state_after_lost_hold
from tunedeck.store.models import Job, WorkItem
from tunedeck.store.quotas import QuotaRepository
from tunedeck.store.records import ClaimedJob, Heartbeat
from tunedeck.store.work_item_moves import end_item

FINISH_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PAUSED})


@dataclass(frozen=True)
class JobEnd:
    """How a worker ends its hold on a job: succeeded, failed, cancelled, or paused (from pausing).

    ValueError at once for any other state; `error` becomes the job's error message and
    `diagnosis` (when given) its diagnosis.
    """

    state: JobState | str
    error: str | None = None
    diagnosis: dict[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        target = JobState(self.state)
        if target not in FINISH_STATES:
            raise ValueError(f"finish accepts {sorted(s.value for s in FINISH_STATES)}, not {target.value}")
        object.__setattr__(self, "state", target)


class TrainPolicy:
    """Hooks that carry a job's attempt on its `train` item."""

    owner_limited = True

    def __init__(self, quotas: QuotaRepository) -> None:
        self.quotas = quotas

    def refusal_to_claim(self, session: Session, owner_id: str, now: datetime) -> str | None:
        """The owner's running-jobs or spending limit that keeps their jobs waiting, or None."""
        return self.quotas.refusal_to_claim(session, owner_id, now)

    def on_claim(self, session: Session, item: WorkItem, token: str, now: datetime) -> ClaimedJob | None:
        """Start the job's attempt: `running`, attempt + 1, resuming from its newest committed checkpoint."""
        return start_attempt(session, item, token, now)

    def holds(self, session: Session, item: WorkItem) -> bool:
        """Whether the item's job is still running or pausing (locked for update, after its item)."""
        return item.job_id is not None and locked_held_job(session, item.job_id) is not None

    def on_heartbeat(self, session: Session, item: WorkItem) -> Heartbeat:
        """The job's state and any action a person requested (`pause` or `cancel`)."""
        job = _job(session, item)
        return Heartbeat(
            ok=True, requested_action=job.requested_action, state=JobState(job.state), lease_until=item.lease_until
        )

    def on_finish(self, session: Session, item: WorkItem, end: Any, now: datetime) -> None:
        """Move the job to the end's state (StateTransitionError where its state machine forbids it).

        The item follows the job: it ends as the job did.
        """
        if not isinstance(end, JobEnd):
            raise TypeError(f"a train item ends with a JobEnd; got {end!r}")
        job = _job(session, item)
        job.error_message = end.error
        if end.diagnosis is not None:
            job.diagnosis = dict(end.diagnosis)
        target = JobState(end.state)
        move_job(job, target, now)
        let_go(session, job, item, now, reason=target.value)

    def on_release(self, session: Session, item: WorkItem, now: datetime) -> str:
        """Back to its place in line, or `paused` / `cancelled` when a person asked for that."""
        job = _job(session, item)
        target = state_after_lost_hold(job, lease_expired=False)
        move_job(job, target, now)
        let_go(session, job, item, now, reason="released")
        return target

    def on_lease_lost(self, session: Session, item: WorkItem, now: datetime) -> str | None:
        """Back in line (attempt + 1 at its next claim) until its claims since the last resume reach `max_attempts`."""
        job = locked_held_job(session, item.job_id) if item.job_id is not None else None
        if job is None:  # the job row went (deleted by an operator): nothing is left to run
            end_item(item, WorkState.CANCELLED, now, error={"detail": "the job is gone", "status": 404})
            return None
        target = state_after_lost_hold(job, lease_expired=True)
        if target is JobState.FAILED:
            job.error_message = (
                f"the lease expired {job.attempt - job.attempt_floor} times (max_attempts="
                f"{job.max_attempts}); last worker {job.worker_id!r} stopped heartbeating"
            )
        move_job(job, target, now)
        let_go(session, job, item, now, reason="lease_expired")
        return target

    def refusal_to_cancel(self, item: WorkItem) -> str | None:
        """A job's item follows its job: cancelling the job keeps its checkpoints."""
        return (
            f"work item {item.id!r} is the training of job {item.job_id!r}: cancel the job "
            f"(POST /api/v1/jobs/{item.job_id}/cancel), which keeps its checkpoints"
        )


def _job(session: Session, item: WorkItem) -> Job:
    """The item's job, already locked by `holds` in this transaction."""
    job = session.get(Job, item.job_id)
    assert job is not None, "holds() found the job in this transaction"
    return job
