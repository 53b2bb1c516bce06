"""The job queue as workers see it: claim a job, heartbeat, finish, release, take back lost jobs.

A job waits and runs as a `train` item of the one work queue (`work_items.py`): a
claim takes the item in priority order, then first in, first out, with a lease and a
fencing token, in one write transaction (`BEGIN IMMEDIATE` on SQLite; `SELECT ... FOR
UPDATE SKIP LOCKED` on PostgreSQL, so concurrent claimers pick different items without
waiting on each other), and starts the job's attempt in it (`job_attempts.py`). After
a claim, every change a worker makes is conditional on its fencing token.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select

from tunedeck.core.states import JobState, WorkState
from tunedeck.jobs.db import Database
from tunedeck.jobs.fencing import HELD_STATES, TRAIN, held_train
from tunedeck.jobs.job_attempts import let_go, move_job, state_after_lost_hold
from tunedeck.jobs.models import FencingLog, Job, WorkItem
from tunedeck.jobs.records import ClaimedJob, Heartbeat
from tunedeck.jobs.types import utcnow
from tunedeck.jobs.work_item_moves import end_item
from tunedeck.jobs.work_items import WorkItemRepository

FINISH_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PAUSED})


class JobQueue:
    """Claim, heartbeat, finish, release, and requeue jobs whose lease expired."""

    def __init__(self, db: Database, work: WorkItemRepository) -> None:
        self.db = db
        self.work = work

    def claim(
        self,
        worker_id: str,
        devices: int,
        lease_s: float,
        *,
        now: datetime | None = None,
        skip_owners: frozenset[str] = frozenset(),
        machines: int = 1,
    ) -> ClaimedJob | None:
        """Take the next queued job that needs at most `devices` accelerators, or None when there is none.

        The job becomes `running` with `worker_id`, a lease of `lease_s` seconds,
        `attempt + 1` and a new fencing token (returned once, in the ClaimedJob).
        Jobs of an owner at a running-jobs or device-hours limit, or named in
        `skip_owners` (the caller found them at their storage limit), wait while
        the next owner's job is taken.
        """
        claimed = self.work.claim(
            worker_id, (TRAIN,), devices, lease_s, now=now, skip_owners=skip_owners, machines=machines
        )
        return claimed.job if claimed is not None else None

    def heartbeat(self, job_id: str, token: str, lease_s: float, *, now: datetime | None = None) -> Heartbeat:
        """Extend the lease while `token` holds the job; falsy (and no change) when the token is stale.

        The answer carries any action a person requested (`pause` or `cancel`).
        """
        now = now or utcnow()
        with self.db.write() as session:
            held = held_train(session, job_id, token)
            if held is None:
                return Heartbeat(ok=False)
            job, item = held
            item.lease_until = now + timedelta(seconds=lease_s)
            return Heartbeat(
                ok=True, requested_action=job.requested_action, state=JobState(job.state), lease_until=item.lease_until
            )

    def lease_until(self, job_id: str) -> datetime | None:
        """When the lease of the job's running attempt ends; None while no worker holds it."""
        with self.db.read() as session:
            return session.scalar(
                select(WorkItem.lease_until).where(
                    WorkItem.job_id == job_id, WorkItem.kind == TRAIN, WorkItem.state == WorkState.RUNNING.value
                )
            )

    def finish(
        self,
        job_id: str,
        token: str,
        state: JobState | str,
        *,
        error: str | None = None,
        diagnosis: dict[str, object] | None = None,
        now: datetime | None = None,
    ) -> bool:
        """End the worker's hold on a job: succeeded, failed, cancelled, or paused (from pausing).

        False, with nothing changed, when the token is stale. StateTransitionError
        when the state machine forbids the move (e.g. paused while not pausing).
        """
        target = JobState(state)
        if target not in FINISH_STATES:
            raise ValueError(f"finish accepts {sorted(s.value for s in FINISH_STATES)}, not {target.value}")
        now = now or utcnow()
        with self.db.write() as session:
            held = held_train(session, job_id, token)
            if held is None:
                return False
            job, item = held
            job.error_message = error
            if diagnosis is not None:
                job.diagnosis = dict(diagnosis)
            move_job(job, target, now)
            let_go(session, job, item, now, reason=target.value)
        return True

    def release(self, job_id: str, token: str, *, now: datetime | None = None) -> JobState | None:
        """Give a held job back (worker shutting down after its checkpoint); None when the token is stale.

        The job goes back to its place in line (its item keeps its place), or to
        `paused` / `cancelled` when a person asked for that.
        """
        now = now or utcnow()
        with self.db.write() as session:
            held = held_train(session, job_id, token)
            if held is None:
                return None
            job, item = held
            target = state_after_lost_hold(job, lease_expired=False)
            move_job(job, target, now)
            let_go(session, job, item, now, reason="released")
            return target

    def requeue_expired(self, *, now: datetime | None = None) -> list[tuple[str, JobState]]:
        """Take back every held job whose lease ended before `now`; returns (job id, new state) pairs.

        A job goes back to the queue (attempt + 1 at its next claim) until its
        claims since the last resume reach `max_attempts`; then it fails with the reason.
        """
        now = now or utcnow()
        moved: list[tuple[str, JobState]] = []
        with self.db.write() as session:
            expired = session.scalars(
                select(WorkItem)
                .where(WorkItem.kind == TRAIN, WorkItem.state == WorkState.RUNNING.value, WorkItem.lease_until < now)
                .order_by(WorkItem.id)
                .with_for_update(skip_locked=True)
            ).all()
            for item in expired:
                job = session.scalars(
                    select(Job).where(Job.id == item.job_id, Job.state.in_(HELD_STATES)).with_for_update()
                ).one_or_none()
                if job is None:  # the job row went (deleted by an operator): nothing is left to run
                    end_item(item, WorkState.CANCELLED, now, error={"detail": "the job is gone", "status": 404})
                    continue
                target = state_after_lost_hold(job, lease_expired=True)
                if target is JobState.FAILED:
                    job.error_message = (
                        f"the lease expired {job.attempt - job.attempt_floor} times (max_attempts="
                        f"{job.max_attempts}); last worker {job.worker_id!r} stopped heartbeating"
                    )
                move_job(job, target, now)
                let_go(session, job, item, now, reason="lease_expired")
                moved.append((job.id, target))
        return moved

    def fencing_log(self, job_id: str) -> list[FencingLog]:
        """Every claim of a job, oldest first: who held it, with which token hash, from when to when."""
        with self.db.read() as session:
            return list(
                session.scalars(
                    select(FencingLog).where(FencingLog.job_id == job_id).order_by(FencingLog.attempt, FencingLog.id)
                )
            )
