"""Progress, ETA and best metric of a page of jobs, read in three grouped queries whatever the page size.

The job ids come from an owner-scoped listing (`JobRepository.list` or `get`),
so these reads need no owner check of their own. They belong with the other
telemetry reads; they sit here until `TelemetryRepository` offers a bulk
progress read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tunedeck.config.training import LOWER_IS_BETTER
from tunedeck.core.states import JobState
from tunedeck.jobs.models import Job
from tunedeck.jobs.store import JobStore

STEP_SERIES = "loss"  # every logged training step records a loss


@dataclass(frozen=True)
class JobProgress:
    """Where a job stands: steps done of the total, time left, best value of its ranking metric."""

    step: int | None
    total_steps: int | None
    eta_seconds: float | None
    best_metric: str
    best_value: float | None

    @property
    def fraction(self) -> float | None:
        """Share of the total steps done (0..1), when both are known."""
        if self.step is None or not self.total_steps:
            return None
        return min(1.0, self.step / self.total_steps)


def _best_metric_name(job: Job) -> str:
    return str((job.config or {}).get("metric_for_best_model") or "eval_loss")


def _eta(job: Job, step: int | None, total: int | None, now: datetime) -> float | None:
    """Seconds left at the pace so far, for a running job; None when there is no pace yet."""
    if JobState(job.state) not in (JobState.RUNNING, JobState.PAUSING) or not step or not total:
        return None
    start = job.started_at
    if start is None:
        return None
    elapsed = (now - start).total_seconds()
    # A resumed job starts counting from its checkpoint, not from step 0.
    done_here = step - (job.resume_from_step or 0)
    if elapsed <= 0 or done_here <= 0:
        return None
    return max(0.0, (total - step) * elapsed / done_here)


def progress_for(store: JobStore, jobs: Sequence[Job], *, now: datetime | None = None) -> dict[str, JobProgress]:
    """Progress of each job in `jobs`, keyed by job id (jobs the caller may see: ids are not re-checked)."""
    if not jobs:
        return {}
    ids = [job.id for job in jobs]
    metric_names = {_best_metric_name(job) for job in jobs}
    steps = store.summaries.latest_steps(ids, STEP_SERIES)
    extremes = store.summaries.series_extremes(ids, sorted(metric_names))
    phases = store.summaries.event_payloads(ids, "phase")
    totals: dict[str, int] = {}
    for job_id, payload in phases:
        total = payload.get("total_steps")
        if isinstance(total, int) and total > 0:
            totals[job_id] = total  # the newest attempt's value wins
    now = now or datetime.now(UTC)
    result = {}
    for job in jobs:
        name = _best_metric_name(job)
        low, high = extremes.get((job.id, name), (None, None))
        best = low if name in LOWER_IS_BETTER else high
        step = steps.get(job.id)
        total = totals.get(job.id)
        result[job.id] = JobProgress(
            step=step,
            total_steps=total,
            eta_seconds=_eta(job, step, total, now),
            best_metric=name,
            best_value=float(best) if best is not None and math.isfinite(float(best)) else None,
        )
    return result


def format_duration(seconds: float | None) -> str:
    """`1h 05m`, `4m 10s`, `12s`; an em dash when unknown."""
    if seconds is None:
        return "—"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
