"""The job queue as workers see it: claim with a lease and a fencing token, heartbeat, finish.

Ordering is priority (high first), then first-in first-out by `queued_at`. A
claim runs in one write transaction: on SQLite that is `BEGIN IMMEDIATE` (one
claimer at a time, WAL keeps readers going); on PostgreSQL the candidate row
is taken with `SELECT ... FOR UPDATE SKIP LOCKED`, so concurrent claimers pick
different jobs without waiting on each other. After a claim, every change a
worker makes is conditional on its fencing token (see `fencing.py`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from tunedeck.core.states import JobState, check_transition
from tunedeck.jobs.db import Database
from tunedeck.jobs.fencing import HELD_STATES, held_job, new_fencing_token
from tunedeck.jobs.models import Checkpoint, FencingLog, Job
from tunedeck.jobs.quotas import QuotaRepository
from tunedeck.jobs.records import CheckpointRef, ClaimedJob, Heartbeat
from tunedeck.jobs.types import utcnow

FINISH_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.PAUSED})


class JobQueue:
    """Claim, heartbeat, finish, release, and requeue jobs whose lease expired."""

    def __init__(self, db: Database, quotas: QuotaRepository) -> None:
        self.db = db
        self.quotas = quotas

    def claim(
        self,
        worker_id: str,
        devices: int,
        lease_s: float,
        *,
        now: datetime | None = None,
        skip_owners: frozenset[str] = frozenset(),
    ) -> ClaimedJob | None:
        """Take the next queued job that needs at most `devices` accelerators, or None when there is none.

        The job becomes `running` with `worker_id`, a lease of `lease_s` seconds,
        `attempt + 1` and a new fencing token (returned once, in the ClaimedJob).
        Jobs of an owner at a running-jobs or device-hours limit, or named in
        `skip_owners` (the caller found them at their storage limit), wait while
        the next owner's job is taken.
        """
        now = now or utcnow()
        token, digest = new_fencing_token()
        with self.db.write() as session:
            waiting = set(skip_owners)
            while True:
                job = session.scalars(
                    select(Job)
                    .where(
                        Job.state == JobState.QUEUED.value,
                        Job.devices_needed <= devices,
                        Job.owner_id.not_in(waiting),
                    )
                    .order_by(Job.priority.desc(), Job.queued_at, Job.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                ).one_or_none()
                if job is None:
                    return None
                if self.quotas.claim_refusal(session, job.owner_id, now) is None:
                    break
                waiting.add(job.owner_id)
            check_transition(JobState(job.state), JobState.RUNNING)
            newest = session.scalars(
                select(Checkpoint)
                .where(Checkpoint.job_id == job.id, Checkpoint.state == "committed")
                .order_by(Checkpoint.step.desc())
                .limit(1)
            ).one_or_none()
            job.state = JobState.RUNNING.value
            job.worker_id = worker_id
            job.lease_until = now + timedelta(seconds=lease_s)
            job.attempt += 1
            job.fencing_sha256 = digest
            job.requested_action = None
            job.resume_from_step = newest.step if newest else None
            job.started_at = job.started_at or now
            job.updated_at = now
            session.add(
                FencingLog(
                    job_id=job.id,
                    worker_id=worker_id,
                    token_sha256=digest,
                    attempt=job.attempt,
                    claimed_at=now,
                )
            )
            return ClaimedJob(
                job_id=job.id,
                owner_id=job.owner_id,
                name=job.name,
                config=dict(job.config),
                fencing_token=token,
                attempt=job.attempt,
                lease_until=job.lease_until,
                devices_needed=job.devices_needed,
                base_model_id=job.base_model_id,
                train_dataset_version_id=job.train_dataset_version_id,
                validation_dataset_version_id=job.validation_dataset_version_id,
                resume_from=_ref(newest),
            )

    def heartbeat(self, job_id: str, token: str, lease_s: float, *, now: datetime | None = None) -> Heartbeat:
        """Extend the lease while `token` holds the job; falsy (and no change) when the token is stale.

        The answer carries any action a person requested (`pause` or `cancel`).
        """
        now = now or utcnow()
        with self.db.write() as session:
            job = held_job(session, job_id, token)
            if job is None:
                return Heartbeat(ok=False)
            job.lease_until = now + timedelta(seconds=lease_s)
            return Heartbeat(
                ok=True,
                requested_action=job.requested_action,
                state=JobState(job.state),
                lease_until=job.lease_until,
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
            job = held_job(session, job_id, token)
            if job is None:
                return False
            check_transition(JobState(job.state), target)
            job.state = target.value
            job.error_message = error
            if diagnosis is not None:
                job.diagnosis = dict(diagnosis)
            if target.is_terminal:
                job.finished_at = now
            _release(session, job, now, reason=target.value)
        return True

    def release(self, job_id: str, token: str, *, now: datetime | None = None) -> JobState | None:
        """Give a held job back (worker shutting down after its checkpoint); None when the token is stale.

        The job goes back to the front of its priority (it keeps its place in
        line), or to `paused` / `cancelled` when a person asked for that.
        """
        now = now or utcnow()
        with self.db.write() as session:
            job = held_job(session, job_id, token)
            if job is None:
                return None
            target = _state_after_lost_hold(job, lease_expired=False)
            _move(job, target, now)
            _release(session, job, now, reason="released")
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
                select(Job)
                .where(Job.state.in_(HELD_STATES), Job.lease_until < now)
                .order_by(Job.id)
                .with_for_update(skip_locked=True)
            ).all()
            for job in expired:
                target = _state_after_lost_hold(job, lease_expired=True)
                if target is JobState.FAILED:
                    job.error_message = (
                        f"the lease expired {job.attempt - job.attempt_floor} times (max_attempts="
                        f"{job.max_attempts}); last worker {job.worker_id!r} stopped heartbeating"
                    )
                _move(job, target, now)
                _release(session, job, now, reason="lease_expired")
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


def _ref(checkpoint: Checkpoint | None) -> CheckpointRef | None:
    if checkpoint is None:
        return None
    return CheckpointRef(
        step=checkpoint.step,
        storage_prefix=checkpoint.storage_prefix,
        manifest_sha256=checkpoint.manifest_sha256,
    )


def _state_after_lost_hold(job: Job, *, lease_expired: bool) -> JobState:
    """Where a job goes when its worker lets go (shutdown) or disappears (lease expiry)."""
    if job.requested_action == "cancel":
        return JobState.CANCELLED
    if job.state == JobState.PAUSING.value:
        return JobState.PAUSED
    if lease_expired and job.attempt - job.attempt_floor >= job.max_attempts:
        return JobState.FAILED
    return JobState.QUEUED


def _move(job: Job, target: JobState, now: datetime) -> None:
    check_transition(JobState(job.state), target)
    job.state = target.value
    if target is JobState.QUEUED:
        job.worker_id = None  # queued_at is kept: a requeued job keeps its place in line
    else:
        job.requested_action = None
    if target.is_terminal:
        job.finished_at = now


def _release(session: Session, job: Job, now: datetime, *, reason: str) -> None:
    """Invalidate the job's fencing token and close its fencing-log row."""
    digest = job.fencing_sha256
    job.fencing_sha256 = None
    job.lease_until = None
    job.updated_at = now
    if digest is None:
        return
    session.execute(
        update(FencingLog)
        .where(FencingLog.job_id == job.id, FencingLog.token_sha256 == digest, FencingLog.released_at.is_(None))
        .values(released_at=now, release_reason=reason)
    )
