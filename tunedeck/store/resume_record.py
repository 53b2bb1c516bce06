"""The `resume` event a job's timeline shows: which step a person resumed it from.

The engine writes a run's events (one `seq` per line of its `events.jsonl`, from 0); a
resume happens between runs, so the platform records it itself, in the attempt that ended,
with a negative `seq` that no line of a run's file can take.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tunedeck.store.models import Job, JobEvent
from tunedeck.store.types import utcnow

RESUME_EVENT = "resume"


def resume_message(step: int | None) -> str:
    """The timeline's words for a resume from `step` (None: no checkpoint, so from the start)."""
    return "resumed from the start (no checkpoint)" if step is None else f"resumed from step {step}"


def record_resume(session: Session, job: Job) -> None:
    """Add the `resume` event of `job` (locked by the caller, `resume_from_step` already set) to `session`."""
    lowest = session.scalar(
        select(func.min(JobEvent.seq)).where(JobEvent.job_id == job.id, JobEvent.attempt == job.attempt)
    )
    seq = min(-1, (lowest or 0) - 1)
    step = job.resume_from_step
    session.add(
        JobEvent(
            job_id=job.id,
            attempt=job.attempt,
            seq=seq,
            type=RESUME_EVENT,
            payload={"step": step, "message": resume_message(step)},
            time=utcnow(),
        )
    )
