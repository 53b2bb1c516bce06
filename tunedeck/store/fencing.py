"""Fencing tokens: every state change a worker makes is conditional on the token of its claim.

A claim stores only the SHA-256 of a fresh random token on the work item it took
(a job's claim is on its `train` item). When a lease expires and the item is
claimed again, the old token stops matching, so a worker that lost its lease
(paused by the OS, cut off by the network) changes nothing.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import select
from sqlalchemy.orm import Session

from tunedeck.core.ids import new_token
from tunedeck.core.states import JobState, WorkKind, WorkState
from tunedeck.store.models import Job, WorkItem

# States in which a worker holds a job.
HELD_STATES = (JobState.RUNNING.value, JobState.PAUSING.value)
# The kind of work item that is a job's place in the queue.
TRAIN = WorkKind.TRAIN.value


def token_sha256(token: str) -> str:
    """The stored form of a token (API or fencing): hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_fencing_token() -> tuple[str, str]:
    """A fresh token and its hash: the worker keeps the token, the database the hash."""
    token = new_token(24)
    return token, token_sha256(token)


def held_job(session: Session, job_id: str, token: str) -> Job | None:
    """The job, locked for update, if `token` is the current fencing token of its running `train` item.

    None when the token is stale, the job ended or it no longer exists: the
    caller must then change nothing.
    """
    held = held_train(session, job_id, token)
    return held[0] if held is not None else None


def held_train(session: Session, job_id: str, token: str) -> tuple[Job, WorkItem] | None:
    """The held job and its running `train` item, both locked for update; None when `token` does not hold it.

    The item is locked first, as a claim does, so the two never wait on each other.
    """
    item = session.scalars(
        select(WorkItem)
        .where(
            WorkItem.job_id == job_id,
            WorkItem.kind == TRAIN,
            WorkItem.fencing_sha256 == token_sha256(token),
            WorkItem.state == WorkState.RUNNING.value,
        )
        .with_for_update()
    ).one_or_none()
    if item is None:
        return None
    job = locked_held_job(session, job_id)
    return (job, item) if job is not None else None


def locked_held_job(session: Session, job_id: str) -> Job | None:
    """The job, locked for update, while a worker holds it (running or pausing); else None."""
    return session.scalars(
        select(Job).where(Job.id == job_id, Job.state.in_(HELD_STATES)).with_for_update()
    ).one_or_none()
