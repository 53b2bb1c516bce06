"""Read-only summaries over many jobs' telemetry, for listings and job pages.

Callers pass job ids they have already read through an owner-scoped call (the
jobs list, a job page); these queries do not check owners again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select

from tunedeck.store.db import Database
from tunedeck.store.models import JobEvent, Metric


class JobSummaryQueries:
    """Aggregates that would cost one query per job if done through the per-job calls."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def latest_steps(self, job_ids: Sequence[str], series: str) -> dict[str, int]:
        """Highest step recorded in `series` for each job that has one."""
        if not job_ids:
            return {}
        with self.db.read() as session:
            rows = session.execute(
                select(Metric.job_id, func.max(Metric.step))
                .where(Metric.job_id.in_(list(job_ids)), Metric.name == series)
                .group_by(Metric.job_id)
            ).all()
        return {job_id: int(step) for job_id, step in rows}

    def series_extremes(self, job_ids: Sequence[str], names: Sequence[str]) -> dict[tuple[str, str], tuple[Any, Any]]:
        """(min, max) of each named series per job, keyed by (job id, series name)."""
        if not job_ids or not names:
            return {}
        with self.db.read() as session:
            rows = session.execute(
                select(Metric.job_id, Metric.name, func.min(Metric.value), func.max(Metric.value))
                .where(Metric.job_id.in_(list(job_ids)), Metric.name.in_(sorted(set(names))))
                .group_by(Metric.job_id, Metric.name)
            ).all()
        return {(job_id, name): (low, high) for job_id, name, low, high in rows}

    def event_payloads(self, job_ids: Sequence[str], event_type: str) -> list[tuple[str, dict[str, Any]]]:
        """(job id, payload) of every event of `event_type` of these jobs, in arrival order."""
        if not job_ids:
            return []
        with self.db.read() as session:
            rows = session.execute(
                select(JobEvent.job_id, JobEvent.payload)
                .where(JobEvent.job_id.in_(list(job_ids)), JobEvent.type == event_type)
                .order_by(JobEvent.id)
            ).all()
        return [(job_id, payload or {}) for job_id, payload in rows]

    def recent_events(self, job_id: str, types: Sequence[str], limit: int) -> list[JobEvent]:
        """The newest `limit` events of these types, oldest first."""
        with self.db.read() as session:
            rows = list(
                session.scalars(
                    select(JobEvent)
                    .where(JobEvent.job_id == job_id, JobEvent.type.in_(list(types)))
                    .order_by(JobEvent.id.desc())
                    .limit(limit)
                )
            )
        return rows[::-1]

    def last_event_id(self, job_id: str) -> int:
        """Id of the job's newest event (0 when it has none): where a live stream starts."""
        with self.db.read() as session:
            return int(session.scalar(select(func.max(JobEvent.id)).where(JobEvent.job_id == job_id)) or 0)
