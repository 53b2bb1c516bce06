"""What a worker's hygiene sweep needs to know about the jobs and work items its folders belong to.

Not owner-scoped: the worker (or the operator's CLI) asks about the ids it found on its own disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from tunedeck.core.states import JobState, WorkState
from tunedeck.store.db import Database
from tunedeck.store.models import Checkpoint, Job, WorkItem

_WRITTEN = "written"  # a checkpoint on a worker's disk whose upload never completed
_CHUNK = 500  # ids per IN (...) list: far below every database's parameter limit


@dataclass(frozen=True)
class JobFolderFacts:
    """A job's state, when it (or its last attempt) ended, its attempt count, and whether a checkpoint of it is
    still uncommitted."""

    state: JobState
    ended_at: datetime
    attempt: int
    uncommitted_checkpoints: bool


class LocalFolderQueries:
    """Facts about the jobs and work items named by folders on a worker's disk."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def job_facts(self, job_ids: Iterable[str]) -> dict[str, JobFolderFacts]:
        """The facts of each job of `job_ids` that still exists (a deleted job is absent)."""
        ids = sorted(set(job_ids))
        facts: dict[str, JobFolderFacts] = {}
        with self.db.read() as session:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                uncommitted = set(
                    session.scalars(
                        select(Checkpoint.job_id).where(Checkpoint.job_id.in_(chunk), Checkpoint.state == _WRITTEN)
                    )
                )
                for job in session.scalars(select(Job).where(Job.id.in_(chunk))):
                    state = JobState(job.state)
                    facts[job.id] = JobFolderFacts(
                        state=state,
                        # A requeued or paused job's last attempt ended at its last change of state.
                        ended_at=(job.finished_at if state.is_terminal else None) or job.updated_at,
                        attempt=job.attempt,
                        uncommitted_checkpoints=job.id in uncommitted,
                    )
        return facts

    def running_items(self, item_ids: Iterable[str]) -> set[str]:
        """Those of `item_ids` that some worker is running now."""
        ids = sorted(set(item_ids))
        running: set[str] = set()
        with self.db.read() as session:
            for start in range(0, len(ids), _CHUNK):
                statement = select(WorkItem.id).where(
                    WorkItem.id.in_(ids[start : start + _CHUNK]), WorkItem.state == WorkState.RUNNING.value
                )
                running.update(session.scalars(statement))
        return running
