"""Metric series and job events."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class MetricPoint(BaseModel):
    """One value at one training step."""

    step: int
    value: float | None = Field(description="null where the value was NaN or infinite (JSON has neither).")


class MetricSeriesOut(BaseModel):
    """A metric's values by step, downsampled (LTTB, ends kept) to at most `max_points` points."""

    job_id: str
    name: str
    max_points: int
    points: list[MetricPoint]


class MetricNamesOut(BaseModel):
    """The metric names a job has recorded."""

    job_id: str
    names: list[str]


class EventOut(BaseModel):
    """One event of a job; `id` orders events across attempts (pass it as `after`)."""

    id: int
    attempt: int
    seq: int = Field(description="Line number in the attempt's events.jsonl (negative: recorded by the platform).")
    type: str
    data: dict[str, Any]
    time: datetime | None = None
