"""Metric series and job events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel


class MetricPoint(BaseModel):
    """One value at one training step."""

    step: int
    value: float | None  # None where the value was NaN or infinite (JSON has neither)


class MetricSeriesOut(BaseModel):
    """A metric's values by step, possibly downsampled to at most `points` points."""

    job_id: str
    name: str
    points: list[MetricPoint]
    total_points: int
    downsampled: bool


class MetricNamesOut(BaseModel):
    """The metric names a job has recorded."""

    job_id: str
    names: list[str]


class EventOut(BaseModel):
    """One event of a job, in the order the worker recorded it."""

    seq: int
    type: str
    data: dict[str, Any]
    created_at: datetime | None = None
