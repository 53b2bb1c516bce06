"""What jobs created through the OpenAI-compatible API were asked with: one `FineTuningRequest` row per job.

The row is keyed by the job: callers read the job first (which checks its owner), then
its request. A job created through tunedeck's own API has none. Deleting the job
deletes its row (foreign key, ON DELETE CASCADE).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select

from tunedeck.store.db import Database
from tunedeck.store.models import FineTuningRequest


class FineTuningRequestRepository:
    """Record and read the OpenAI-only part of a fine-tuning job's request."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def record(
        self,
        job_id: str,
        *,
        model: str,
        suffix: str | None,
        metadata: dict[str, str],
        method: dict[str, Any],
        hyperparameters: dict[str, Any],
        integrations: list[dict[str, Any]],
    ) -> FineTuningRequest:
        """Store the request of a job just created."""
        row = FineTuningRequest(
            job_id=job_id,
            model=model,
            suffix=suffix,
            metadata_pairs=dict(metadata),
            method=dict(method),
            hyperparameters=dict(hyperparameters),
            integrations=list(integrations),
        )
        with self.db.write() as session:
            session.add(row)
        return row

    def get(self, job_id: str) -> FineTuningRequest | None:
        """The request of job `job_id`, or None for a job created otherwise."""
        with self.db.read() as session:
            return session.get(FineTuningRequest, job_id)

    def for_jobs(self, job_ids: Iterable[str]) -> dict[str, FineTuningRequest]:
        """The requests of those of `job_ids` that have one, by job id."""
        wanted = list(job_ids)
        if not wanted:
            return {}
        with self.db.read() as session:
            rows = session.scalars(select(FineTuningRequest).where(FineTuningRequest.job_id.in_(wanted)))
            return {row.job_id: row for row in rows}
