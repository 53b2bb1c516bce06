"""When retention policies delete a dataset version's raw data or a job's checkpoints and the job: for the JSON."""

from __future__ import annotations

from datetime import datetime

from tunedeck.service.context import ServiceContext
from tunedeck.service.privacy.retention_plan import ScheduledDeletion, deletion_schedule
from tunedeck.store.retention import RetentionBounds


def retention_bounds(context: ServiceContext) -> RetentionBounds:
    """The operator's bounds, from the server's settings."""
    return RetentionBounds.from_settings(context.settings)


def version_schedule(context: ServiceContext, version_id: str) -> list[ScheduledDeletion]:
    """When the raw data of a version (the caller has read it as theirs) is or was deleted."""
    return deletion_schedule(context.jobs, bounds=retention_bounds(context), dataset_version_id=version_id)


def job_schedule(context: ServiceContext, job_id: str) -> list[ScheduledDeletion]:
    """When a job's checkpoints (but the best and the newest) and the job itself are deleted."""
    return deletion_schedule(context.jobs, bounds=retention_bounds(context), job_id=job_id)


def scheduled_at(schedule: list[ScheduledDeletion], what: str) -> datetime | None:
    """The date of one entry of a schedule, if it is dated and still to come."""
    for entry in schedule:
        if entry.what == what and not entry.done:
            return entry.at
    return None
