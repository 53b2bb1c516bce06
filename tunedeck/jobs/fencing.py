"""Fencing tokens: every state change a worker makes is conditional on the token of its claim.

A claim stores only the SHA-256 of a fresh random token. When a lease expires
and the job is claimed again, the old token stops matching, so a worker that
lost its lease (paused by the OS, cut off by the network) changes nothing.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import select
from sqlalchemy.orm import Session

from tunedeck.core.ids import new_token
from tunedeck.core.states import JobState
from tunedeck.jobs.models import Job

# States in which a worker holds a job.
HELD_STATES = (JobState.RUNNING.value, JobState.PAUSING.value)


def token_sha256(token: str) -> str:
    """The stored form of a token (API or fencing): hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_fencing_token() -> tuple[str, str]:
    """A fresh token and its hash: the worker keeps the token, the database the hash."""
    token = new_token(24)
    return token, token_sha256(token)


def held_job(session: Session, job_id: str, token: str) -> Job | None:
    """The job, locked for update, if `token` is its current fencing token and a worker holds it.

    None when the token is stale, the job ended or it no longer exists: the
    caller must then change nothing.
    """
    return session.scalars(
        select(Job)
        .where(Job.id == job_id, Job.fencing_sha256 == token_sha256(token), Job.state.in_(HELD_STATES))
        .with_for_update()
    ).one_or_none()
