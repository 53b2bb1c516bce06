"""The jobs list's ETA follows the pace of the current attempt, not the time since the job first started."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.fixtures.job_claims import claim_job
from tunedeck.core.states import JobState
from tunedeck.store.job_progress import eta_from_points, progress_for
from tunedeck.store.records import MetricPoint, NewEvent
from tunedeck.store.store import JobStore
from tunedeck.store.train_policy import JobEnd

TOTAL = 100


def _metric_events(first_seq: int, steps: range, start: datetime, seconds_per_step: float) -> list[NewEvent]:
    return [
        NewEvent(
            first_seq + i,
            "metric",
            {"type": "metric", "step": step, "loss": 1.0},
            time=start + timedelta(seconds=i * seconds_per_step),
        )
        for i, step in enumerate(steps)
    ]


def _phase(seq: int) -> NewEvent:
    return NewEvent(seq, "phase", {"type": "phase", "name": "training", "status": "started", "total_steps": TOTAL})


def test_eta_ignores_the_time_a_job_spent_paused(sqlite_url: str, tmp_path: Path) -> None:
    store = JobStore.open(sqlite_url, migrate=False)
    try:
        alice = store.users.create_user("alice")
        job = store.jobs.enqueue(alice, name="paused once", config={})
        long_ago = datetime.now(UTC) - timedelta(hours=10)
        first = claim_job(store, "w1", devices=0, lease_s=60, now=long_ago)
        assert first is not None
        # Attempt 1: 10 steps at 10 s a step, then a pause of many hours.
        store.telemetry.append_events(job.id, 1, [_phase(0), *_metric_events(1, range(1, 11), long_ago, 10.0)])
        store.jobs.request_pause(alice, job.id)
        assert store.queue.finish(first.item_id, first.fencing_token, JobEnd(JobState.PAUSED))
        store.jobs.resume(alice, job.id)
        now = datetime.now(UTC)
        second = claim_job(store, "w1", devices=0, lease_s=60, now=now - timedelta(seconds=30))
        assert second is not None and second.attempt == 2
        # Attempt 2 trains at 1 s a step: steps 11..20 took 9 s.
        store.telemetry.append_events(
            job.id, 2, [_phase(0), *_metric_events(1, range(11, 21), now - timedelta(seconds=9), 1.0)]
        )
        store.telemetry.append_metrics(job.id, [MetricPoint("loss", s, 1.0) for s in range(1, 21)])
        row = store.jobs.get(alice, job.id)
        assert row.started_at is not None and row.started_at < now - timedelta(hours=9)  # the first attempt's

        progress = progress_for(store, [row])[job.id]
        assert progress.step == 20 and progress.total_steps == TOTAL
        assert progress.eta_seconds == pytest.approx(80.0)  # 80 steps left at 1 s a step
    finally:
        store.close()


def test_eta_needs_two_timed_steps_of_the_attempt() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert eta_from_points([], 5, 10) is None
    assert eta_from_points([(5, start)], 5, 10) is None
    assert eta_from_points([(5, start), (5, start + timedelta(seconds=3))], 5, 10) is None  # no step done
    assert eta_from_points([(4, start), (5, start)], 5, 10) is None  # no time passed
    assert eta_from_points([("x", start), (None, start), (2, start), (4, start + timedelta(seconds=4))], 4, 10) == 12.0
    assert eta_from_points([(2, start), (12, start + timedelta(seconds=5))], 12, 10) == 0.0  # past the total


def test_a_job_told_to_cancel_has_no_time_left_while_it_stops(sqlite_url: str) -> None:
    store = JobStore.open(sqlite_url, migrate=False)
    try:
        alice = store.users.create_user("alice")
        job = store.jobs.enqueue(alice, name="cancelled", config={})
        now = datetime.now(UTC)
        assert claim_job(store, "w1", devices=0, lease_s=60, now=now - timedelta(seconds=30)) is not None
        store.telemetry.append_events(job.id, 1, [_phase(0), *_metric_events(1, range(1, 11), now, 1.0)])
        store.telemetry.append_metrics(job.id, [MetricPoint("loss", s, 1.0) for s in range(1, 11)])
        assert progress_for(store, [store.jobs.get(alice, job.id)])[job.id].eta_seconds == pytest.approx(90.0)

        store.jobs.request_cancel(alice, job.id)
        row = store.jobs.get(alice, job.id)
        assert row.state == JobState.RUNNING.value  # until its worker stops it
        assert progress_for(store, [row])[job.id].eta_seconds is None
    finally:
        store.close()
