"""A job's attempts on the one work queue: its `train` item is queued, claimed and let go by the job's rules.

A job waits as one queued `train` item (created with the job, and again when it is
resumed). Claiming the item starts an attempt of the job in the same transaction; when
the worker lets go (finished, paused, shut down) or disappears (lease expired), the job
moves by its state machine and the item goes back in line or ends with it. The `train`
kind's policy (`train_policy.py`) calls these steps from the queue's verbs.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from tunedeck.core.ids import new_id
from tunedeck.core.states import JobState, WorkState, check_transition
from tunedeck.store.fencing import TRAIN
from tunedeck.store.models import Checkpoint, FencingLog, Job, WorkItem
from tunedeck.store.records import CheckpointRef, ClaimedJob
from tunedeck.store.work_item_moves import end_item, requeue_item

# What a train item's end says about how its job ended.
_ITEM_END: dict[JobState, WorkState] = {
    JobState.SUCCEEDED: WorkState.SUCCEEDED,
    JobState.PAUSED: WorkState.SUCCEEDED,  # the attempt ended as asked: the job waits for its owner
    JobState.FAILED: WorkState.FAILED,
    JobState.CANCELLED: WorkState.CANCELLED,
}


def new_train_item(job: Job, now: datetime) -> WorkItem:
    """The queued `train` item that puts `job` in line (the caller adds it in the job's transaction)."""
    return WorkItem(
        id=new_id("wi_"),
        owner_id=job.owner_id,
        kind=TRAIN,
        state=WorkState.QUEUED.value,
        inputs={},
        job_id=job.id,
        devices_needed=job.devices_needed,
        machines_needed=int((job.config or {}).get("machines") or 1),
        priority=job.priority,
        progress={},
        max_attempts=job.max_attempts,
        attempt=0,
        created_at=now,
        updated_at=now,
    )


def waiting_train_item(session: Session, job_id: str) -> WorkItem | None:
    """The job's queued or running `train` item, locked for update (before its job: the claim's order)."""
    return session.scalars(
        select(WorkItem)
        .where(
            WorkItem.job_id == job_id,
            WorkItem.kind == TRAIN,
            WorkItem.state.in_([WorkState.QUEUED.value, WorkState.RUNNING.value]),
        )
        .with_for_update()
    ).one_or_none()


def start_attempt(session: Session, item: WorkItem, token: str, now: datetime) -> ClaimedJob:
    """Start the job of a `train` item just claimed (the item already carries the claim): job `running`, attempt + 1.

    The job resumes from its newest committed checkpoint; the claim is written to its fencing log.
    """
    job = session.scalars(select(Job).where(Job.id == item.job_id).with_for_update()).one()
    check_transition(JobState(job.state), JobState.RUNNING)
    newest = session.scalars(
        select(Checkpoint)
        .where(Checkpoint.job_id == job.id, Checkpoint.state == "committed")
        .order_by(Checkpoint.step.desc())
        .limit(1)
    ).one_or_none()
    job.state = JobState.RUNNING.value
    job.worker_id = item.worker_id
    job.attempt += 1
    job.requested_action = None
    job.resume_from_step = newest.step if newest else None
    job.started_at = job.started_at or now
    job.updated_at = now
    assert item.worker_id is not None and item.fencing_sha256 is not None and item.lease_until is not None
    session.add(
        FencingLog(
            job_id=job.id, worker_id=item.worker_id, token_sha256=item.fencing_sha256, attempt=job.attempt,
            claimed_at=now,
        )
    )  # fmt: skip
    return ClaimedJob(
        job_id=job.id,
        item_id=item.id,
        owner_id=job.owner_id,
        name=job.name,
        config=dict(job.config),
        fencing_token=token,
        attempt=job.attempt,
        lease_until=item.lease_until,
        devices_needed=job.devices_needed,
        base_model_id=job.base_model_id,
        train_dataset_version_id=job.train_dataset_version_id,
        validation_dataset_version_id=job.validation_dataset_version_id,
        resume_from=_ref(newest),
        guards=[str(guard) for guard in job.guards or []],
    )


def state_after_lost_hold(job: Job, *, lease_expired: bool) -> JobState:
    """Where a job goes when its worker lets go (shutdown) or disappears (lease expiry)."""
    if job.requested_action == "cancel":
        return JobState.CANCELLED
    if job.state == JobState.PAUSING.value:
        return JobState.PAUSED
    if lease_expired and job.attempt - job.attempt_floor >= job.max_attempts:
        return JobState.FAILED
    return JobState.QUEUED


def move_job(job: Job, target: JobState, now: datetime) -> None:
    """The job's state machine step when its worker lets go of it."""
    check_transition(JobState(job.state), target)
    job.state = target.value
    if target is JobState.QUEUED:
        job.worker_id = None
    else:
        job.requested_action = None
    if target.is_terminal:
        job.finished_at = now
    job.updated_at = now


def let_go(session: Session, job: Job, item: WorkItem, now: datetime, *, reason: str) -> None:
    """After the job moved: its item goes back in line (keeping its place) or ends like the job; the log row closes."""
    digest = item.fencing_sha256
    state = JobState(job.state)
    if state is JobState.QUEUED:
        requeue_item(item, now)
    elif (ended := _ITEM_END[state]) is WorkState.SUCCEEDED:
        end_item(item, ended, now, result={"job_state": state.value})
    else:
        status = 409 if ended is WorkState.CANCELLED else 503
        end_item(item, ended, now, error={"detail": job.error_message or f"the job is {state}", "status": status})
    if digest is None:
        return
    session.execute(
        update(FencingLog)
        .where(FencingLog.job_id == job.id, FencingLog.token_sha256 == digest, FencingLog.released_at.is_(None))
        .values(released_at=now, release_reason=reason)
    )


def _ref(checkpoint: Checkpoint | None) -> CheckpointRef | None:
    if checkpoint is None:
        return None
    return CheckpointRef(
        step=checkpoint.step,
        storage_prefix=checkpoint.storage_prefix,
        manifest_sha256=checkpoint.manifest_sha256,
    )
