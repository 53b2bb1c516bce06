"""Metric series of a job, downsampled on the server so long runs chart quickly."""

from __future__ import annotations

import math

from fastapi import APIRouter, Query

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.common import SQL_INT_MAX, ErrorOut
from tunedeck.api.schemas.metrics import MetricNamesOut, MetricPoint, MetricSeriesOut

router = APIRouter(prefix="/jobs/{job_id}/metrics", tags=["metrics"])


@router.get("", response_model=MetricNamesOut, responses={404: {"model": ErrorOut}})
def metric_names(job_id: str, user: CurrentUser, context: Context) -> MetricNamesOut:
    """The names of the series a job has recorded (loss, learning_rate, eval_loss, ...)."""
    return MetricNamesOut(job_id=job_id, names=context.jobs.telemetry.metric_names(user, job_id))


@router.get("/{name:path}", response_model=MetricSeriesOut, responses={404: {"model": ErrorOut}})
def metric_series(
    job_id: str,
    name: str,
    user: CurrentUser,
    context: Context,
    points: int = Query(1000, ge=3, le=20_000, description="Most points to return (downsampled beyond)."),
    min_step: int | None = Query(None, ge=0, le=SQL_INT_MAX),
    max_step: int | None = Query(None, ge=0, le=SQL_INT_MAX),
) -> MetricSeriesOut:
    """One series by step; an unknown name gives an empty series, an unknown job 404."""
    series = context.jobs.telemetry.series(
        user, job_id, name, max_points=points, min_step=min_step, max_step=max_step
    )
    return MetricSeriesOut(
        job_id=job_id,
        name=name,
        max_points=points,
        points=[MetricPoint(step=s, value=v if math.isfinite(v) else None) for s, v in series],
    )
