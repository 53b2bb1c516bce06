"""Progress, ETA, best metric and early stop of a page of jobs: four grouped queries, plus one per running job.

The job ids come from an owner-scoped listing (`JobRepository.list` or `get`),
so these reads need no owner check of their own. The dashboard's job list and the
rental plan's tracking both read them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tunedeck.core.metric_direction import lower_is_better
from tunedeck.core.states import JobState
from tunedeck.store.early_stop import EarlyStop, early_stop_from
from tunedeck.store.models import Job
from tunedeck.store.store import JobStore

STEP_SERIES = "loss"  # every logged training step records a loss
ETA_WINDOW = 50  # metric events the pace is measured over: recent enough to follow a change of speed


@dataclass(frozen=True)
class JobProgress:
    """Where a job stands: steps done of the total, time left, best value of its ranking metric."""

    step: int | None
    total_steps: int | None
    eta_seconds: float | None
    best_metric: str
    best_value: float | None
    early_stop: EarlyStop | None = None  # the run ended before its planned steps: it is complete all the same

    @property
    def fraction(self) -> float | None:
        """Share of the total steps done (0..1), when both are known; 1 for a run that stopped early."""
        if self.early_stop is not None:
            return 1.0
        if self.step is None or not self.total_steps:
            return None
        return min(1.0, self.step / self.total_steps)

    @property
    def bar_total(self) -> int | None:
        """The steps a progress bar counts to: the planned total, or the step an early stop ended the run at."""
        return self.early_stop.step if self.early_stop is not None else self.total_steps


def _best_metric_name(job: Job) -> str:
    return str((job.config or {}).get("metric_for_best_model") or "eval_loss")


def _eta(store: JobStore, job: Job, step: int | None, total: int | None) -> float | None:
    """Seconds left at the current attempt's training pace; None when there is no pace yet, or it was cancelled.

    The pace comes from the times the engine stamped on the attempt's newest
    metric events, not from `started_at`: that is the first attempt's start, so
    it would count the time a job sat paused or queued between attempts.
    """
    if JobState(job.state) not in (JobState.RUNNING, JobState.PAUSING) or not step or not total:
        return None
    if job.requested_action == "cancel":  # a run told to stop has no time left, even before it stops
        return None
    events = store.summaries.recent_events(job.id, ("metric",), ETA_WINDOW)
    return eta_from_points([(e.payload.get("step"), e.time) for e in events if e.attempt == job.attempt], step, total)


def eta_from_points(points: Sequence[tuple[object, datetime]], step: int, total: int) -> float | None:
    """Seconds to go from `step` to `total` at the pace of `points` ((step, time) of metric events).

    Needs two points with distinct steps and times; points without an integer step are skipped.
    """
    timed = sorted((s, when) for s, when in points if isinstance(s, int) and not isinstance(s, bool))
    if len(timed) < 2:
        return None
    (first_step, first_time), (last_step, last_time) = timed[0], timed[-1]
    seconds = (last_time - first_time).total_seconds()
    steps = last_step - first_step
    if seconds <= 0 or steps <= 0:
        return None
    return max(0.0, (total - step) * seconds / steps)


def progress_for(store: JobStore, jobs: Sequence[Job]) -> dict[str, JobProgress]:
    """Progress of each job in `jobs`, keyed by job id (jobs the caller may see: ids are not re-checked)."""
    if not jobs:
        return {}
    ids = [job.id for job in jobs]
    metric_names = {_best_metric_name(job) for job in jobs}
    steps = store.summaries.latest_steps(ids, STEP_SERIES)
    extremes = store.summaries.series_extremes(ids, sorted(metric_names))
    phases = store.summaries.event_payloads(ids, "phase")
    stops: dict[str, EarlyStop | None] = {}
    configs = {job.id: job.config for job in jobs}
    for job_id, payload in store.summaries.event_payloads(ids, "result"):
        stops[job_id] = early_stop_from(payload, configs.get(job_id))  # the newest attempt's result wins
    totals: dict[str, int] = {}
    for job_id, payload in phases:
        total = payload.get("total_steps")
        if isinstance(total, int) and total > 0:
            totals[job_id] = total  # the newest attempt's value wins
    result = {}
    for job in jobs:
        name = _best_metric_name(job)
        low, high = extremes.get((job.id, name), (None, None))
        best = low if lower_is_better(name) else high
        step = steps.get(job.id)
        total = totals.get(job.id)
        result[job.id] = JobProgress(
            step=step,
            total_steps=total,
            eta_seconds=_eta(store, job, step, total),
            best_metric=name,
            best_value=float(best) if best is not None and math.isfinite(float(best)) else None,
            early_stop=stops.get(job.id) if job.state == JobState.SUCCEEDED.value else None,
        )
    return result
