"""Actual against planned once the rental has started: each phase's projected end from the experiment's jobs.

A variant's job tells where its phase stands: ended (its finish time), running (its end
projected at its own pace: the time left its steps give, or the elapsed time over the
share of steps done), paused (what is left of it from now) or not started (its planned
duration from the later of now and the end of the phase before). Phases no job records
(the checks, the final evaluation, the reload margin, the export) keep their planned
duration, starting no earlier than now. When the last phase would end after the rental,
the advice says what to drop to fit: the variants not started yet, last first, then
fewer epochs for the ones running. `now` is a parameter so the arithmetic is testable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tunedeck.planning.durations import rental_duration
from tunedeck.planning.timeline import INITIAL_CHECK, VARIANT, Phase, Timeline

ENDED = frozenset({"succeeded", "failed", "cancelled"})
RUNNING = frozenset({"running", "pausing"})


@dataclass(frozen=True)
class VariantRun:
    """The job of one variant as plain data: its state, times and steps."""

    name: str
    job_id: str
    state: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    step: int | None = None
    total_steps: int | None = None
    eta_seconds: float | None = None  # time left at the attempt's recent pace, when known

    @property
    def fraction(self) -> float | None:
        """Share of the steps done, when both figures are known."""
        if not self.step or not self.total_steps:
            return None
        return min(1.0, self.step / self.total_steps)


@dataclass(frozen=True)
class PhaseProgress:
    """One phase: planned against projected."""

    key: str
    label: str
    status: str  # done | running | paused | waiting
    planned_end: datetime
    projected_end: datetime
    late: bool  # ends after the rental
    job_id: str | None = None
    fraction: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "key": self.key,
            "label": self.label,
            "status": self.status,
            "planned_end": self.planned_end.isoformat(),
            "projected_end": self.projected_end.isoformat(),
            "late": self.late,
            "job_id": self.job_id,
            "fraction": self.fraction,
        }


@dataclass(frozen=True)
class Tracking:
    """Where the rental stands at `now`, and what to drop when it will not fit."""

    started_at: datetime
    now: datetime
    rental_days: int
    phases: tuple[PhaseProgress, ...]
    warnings: tuple[str, ...]
    advice: tuple[str, ...]

    @property
    def rental_end(self) -> datetime:
        """When the rental ends."""
        return self.started_at + timedelta(days=self.rental_days)

    @property
    def projected_end(self) -> datetime:
        """When the last phase is projected to end."""
        return self.phases[-1].projected_end if self.phases else self.started_at

    @property
    def late(self) -> bool:
        """Whether some phase is projected to end after the rental."""
        return any(phase.late for phase in self.phases)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "started_at": self.started_at.isoformat(),
            "now": self.now.isoformat(),
            "rental_days": self.rental_days,
            "rental_end": self.rental_end.isoformat(),
            "projected_end": self.projected_end.isoformat(),
            "late": self.late,
            "phases": [phase.to_dict() for phase in self.phases],
            "warnings": list(self.warnings),
            "advice": list(self.advice),
        }


def track(
    timeline: Timeline,
    *,
    started_at: datetime,
    rental_days: int,
    runs: Mapping[str, VariantRun],
    now: datetime,
) -> Tracking:
    """Project every phase's end at `now` from the variants' jobs (`runs`, keyed by variant name)."""
    rental_end = started_at + timedelta(days=rental_days)
    first_start = min((run.started_at for run in runs.values() if run.started_at is not None), default=None)
    cursor = started_at
    progress: list[PhaseProgress] = []
    train_left: dict[str, float] = {}
    for phase in timeline.phases:
        planned_end = started_at + timedelta(seconds=phase.end_s)
        run = runs.get(phase.variant) if phase.variant is not None else None
        if phase.kind == INITIAL_CHECK and first_start is not None:
            status, end = "done", max(started_at, first_start)
        elif phase.kind == VARIANT and run is not None:
            status, end, train_left[phase.key] = _variant_end(phase, run, cursor, now)
        else:
            status = "running" if phase.kind == INITIAL_CHECK and now >= cursor else "waiting"
            end = max(cursor, now) + timedelta(seconds=phase.seconds)
        if status == "waiting" and phase.kind == VARIANT:
            train_left[phase.key] = phase.parts[0].seconds
        progress.append(
            PhaseProgress(
                key=phase.key,
                label=phase.label,
                status=status,
                planned_end=planned_end,
                projected_end=end,
                late=end > rental_end,
                job_id=run.job_id if run is not None else None,
                fraction=run.fraction if run is not None else None,
            )
        )
        cursor = max(cursor, end)
    warnings, advice = _warn(timeline, progress, train_left, rental_end)
    return Tracking(
        started_at=started_at,
        now=now,
        rental_days=rental_days,
        phases=tuple(progress),
        warnings=warnings,
        advice=advice,
    )


def _variant_end(phase: Phase, run: VariantRun, cursor: datetime, now: datetime) -> tuple[str, datetime, float]:
    """(status, projected end, training seconds still to go) of a variant that has a job."""
    training_s, evaluation_s = phase.parts[0].seconds, phase.seconds - phase.parts[0].seconds
    if run.state in ENDED:
        return "done", run.finished_at or now, 0.0
    if run.state in RUNNING and run.started_at is not None:
        if run.eta_seconds is not None:
            left = run.eta_seconds
        elif run.fraction:
            elapsed = max(0.0, (now - run.started_at).total_seconds())
            left = elapsed * (1 - run.fraction) / run.fraction
        else:  # no step yet: the planned training, but never ending before now
            left = max(0.0, (run.started_at + timedelta(seconds=training_s) - now).total_seconds())
        return "running", now + timedelta(seconds=left + evaluation_s), left
    if run.started_at is not None:  # paused, or queued again after an interruption
        left = training_s * (1 - (run.fraction or 0.0))
        return "paused", max(cursor, now) + timedelta(seconds=left + evaluation_s), left
    return "waiting", max(cursor, now) + timedelta(seconds=phase.seconds), training_s


def _warn(
    timeline: Timeline, progress: list[PhaseProgress], train_left: dict[str, float], rental_end: datetime
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The warning when the rental will not hold the phases, and what to drop to fit (last first)."""
    late = [phase for phase in progress if phase.late]
    if not late:
        return (), ()
    over = (progress[-1].projected_end - rental_end).total_seconds()
    first = late[0]
    warnings = (
        f"At the current pace, {first.label} ends {_when(first.projected_end)}, after the rental ends "
        f"{_when(rental_end)}; the plan ends {rental_duration(over)} late.",
    )
    phases = {phase.key: phase for phase in timeline.phases}
    advice: list[str] = []
    saved = 0.0
    for status in ("waiting", "running", "paused"):
        for entry in reversed(progress):
            if saved >= over:
                break
            phase = phases[entry.key]
            if phase.kind != VARIANT or entry.status != status:
                continue
            if status == "waiting":
                advice.append(f"drop variant {phase.variant} (saves {rental_duration(phase.seconds)})")
                saved += phase.seconds
            else:
                advice.append(_fewer_epochs(phase, train_left.get(phase.key, 0.0), over - saved, entry.fraction))
                saved += min(over - saved, train_left.get(phase.key, 0.0))
    if saved < over:
        advice.append(
            f"even so the plan ends {rental_duration(over - saved)} late: rent longer, or shorten the evaluations"
        )
    return warnings, tuple(advice)


def _fewer_epochs(phase: Phase, left_s: float, needed_s: float, done: float | None) -> str:
    """Advice to train a started variant less: how many of its epochs fit in what is left."""
    epochs = phase.epochs or 1
    if left_s <= needed_s:
        return f"stop variant {phase.variant} now and evaluate its latest checkpoint (saves {rental_duration(left_s)})"
    # The share of the steps still to go that fits, on top of the share done, in epochs.
    done_share = done or 0.0
    keep_share = (left_s - needed_s) / left_s
    fit = max(1, math.floor(epochs * (done_share + (1 - done_share) * keep_share)))
    saves = rental_duration(needed_s)
    return f"fewer epochs for {phase.variant}: about {fit} of its {epochs} epochs fit (saves {saves})"


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M %Z").strip()
