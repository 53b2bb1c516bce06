"""A real worker stopping work: SIGTERM drains, a crashed engine fails its job, a cancel ends it cancelled."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tunedeck.core.states import JobState
from tunedeck.storage.base import job_prefix
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore
from tunedeck.worker import execution
from tunedeck.worker.child_process import EngineChild
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import Worker

from .seeding import TINY_JOB_CONFIG, SeededJob, chat_rows, seed_job
from .worker_process import kill_worker, start_worker_process

# Long enough (200 steps) that the job is still training when the test steps in; no checkpoint
# of its own, so any checkpoint found was written because of the stop.
LONG_JOB = {**TINY_JOB_CONFIG, "save_steps": 1000}
LONG_ROWS = 400


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _trained_steps(store: JobStore, seeded: SeededJob) -> int:
    events = store.telemetry.list_events(seeded.user, seeded.job.id, types=["metric"], limit=5000)
    return max((int(event.payload["step"]) for event in events), default=0)


@pytest.fixture
def store(sqlite_url: str) -> Any:
    opened = JobStore.open(sqlite_url)
    yield opened
    opened.close()


def test_sigterm_checkpoints_requeues_and_exits(
    tmp_path: Path, sqlite_url: str, store: JobStore, tiny_llama_dir: Path
) -> None:
    storage_url = (tmp_path / "artifacts").as_uri()
    artifacts = open_store(storage_url)
    seeded = seed_job(store, artifacts, tiny_llama_dir, chat_rows(LONG_ROWS), config=LONG_JOB)
    process = start_worker_process(
        worker_id="w-term", data_dir=tmp_path, database_url=sqlite_url, storage_url=storage_url, s3_endpoint=None
    )
    try:
        _wait_for(lambda: _trained_steps(store, seeded) >= 2, 60, "training to start")
        # As a service manager stops a worker: the whole process group, engine child included.
        os.killpg(process.pid, signal.SIGTERM)
        code = process.wait(timeout=60)
    finally:
        kill_worker(process)
    assert code == 0, (tmp_path / "w-term.log").read_text()

    job = store.jobs.get(seeded.user, seeded.job.id)
    assert job.state == JobState.QUEUED.value and job.worker_id is None  # back in line for any worker
    [checkpoint] = store.checkpoints.committed(seeded.job.id)
    assert 2 <= checkpoint.step < LONG_ROWS // 2  # the drain's own checkpoint, mid-run
    assert artifacts.verify(checkpoint.storage_prefix)
    log = store.queue.fencing_log(seeded.job.id)
    assert [(row.worker_id, row.release_reason) for row in log] == [("w-term", "released")]
    record = f"{job_prefix(seeded.user.id, seeded.job.id)}/run"
    assert artifacts.read_bytes(f"{record}/events.jsonl")  # the stopped run's record, kept at the pause


@pytest.fixture
def worker_ctx(tmp_path: Path, store: JobStore) -> WorkerContext:
    return WorkerContext(
        worker_id="worker-a",
        store=store,
        artifacts=open_store((tmp_path / "artifacts").as_uri()),
        runs_dir=tmp_path / "runs",
        lease_s=20.0,
        heartbeat_s=0.3,
        poll_s=0.1,
    )


def _drive(worker: Worker, until: Callable[[], bool], timeout: float, what: str) -> None:
    """Run the worker loop in this thread until `until()`; then wait for its job threads."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        worker.run_once()
        time.sleep(0.1)


def _join(worker: Worker) -> None:
    for job_id in worker.running_jobs:
        _wait_for(lambda job_id=job_id: job_id not in worker.running_jobs, 60, f"job {job_id} to end")


def test_a_crashed_engine_fails_the_job_with_its_output_and_a_diagnosis(
    worker_ctx: WorkerContext, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, artifacts = worker_ctx.store, worker_ctx.artifacts
    children: list[EngineChild] = []
    start = EngineChild.start

    def _start(spec_path: Path, log_path: Path, env: dict[str, str] | None = None, **launch: Any) -> EngineChild:
        children.append(start(spec_path, log_path, env, **launch))
        return children[-1]

    monkeypatch.setattr(execution.EngineChild, "start", _start)
    seeded = seed_job(store, artifacts, tiny_llama_dir, chat_rows(LONG_ROWS), config=LONG_JOB)
    worker = Worker(worker_ctx)
    _drive(worker, lambda: _trained_steps(store, seeded) >= 2, 60, "training to start")
    children[0].process.kill()  # as the kernel's out-of-memory killer would
    _join(worker)

    job = store.jobs.get(seeded.user, seeded.job.id)
    assert job.state == JobState.FAILED.value
    assert job.diagnosis is not None
    assert job.diagnosis["kind"] == "crash" and job.diagnosis["signal"] == "SIGKILL"
    assert any("out-of-memory" in line for line in job.diagnosis["advice"])
    message = job.error_message or ""
    assert message.startswith("the training process was killed by SIGKILL")
    engine_output = children[0].log_path.read_text().strip().splitlines()
    assert "--- last output ---" in message and engine_output[-1].strip() in message
    record = f"{job_prefix(seeded.user.id, seeded.job.id)}/run"
    assert artifacts.read_bytes(f"{record}/events.jsonl")  # the failed run's record explains it


def test_cancelling_a_running_job_stops_its_engine(worker_ctx: WorkerContext, tiny_llama_dir: Path) -> None:
    store, artifacts = worker_ctx.store, worker_ctx.artifacts
    seeded = seed_job(store, artifacts, tiny_llama_dir, chat_rows(LONG_ROWS), config=LONG_JOB)
    worker = Worker(worker_ctx)
    _drive(worker, lambda: _trained_steps(store, seeded) >= 2, 60, "training to start")
    store.jobs.request_cancel(seeded.user, seeded.job.id)
    _drive(worker, lambda: not worker.running_jobs, 30, "the cancelled attempt to end")

    job = store.jobs.get(seeded.user, seeded.job.id)
    assert job.state == JobState.CANCELLED.value and job.finished_at is not None
    assert _trained_steps(store, seeded) < LONG_ROWS // 2  # stopped, not run to the end
    assert store.checkpoints.committed(seeded.job.id) == []  # cancel stops at once, no checkpoint
    log = store.queue.fencing_log(seeded.job.id)
    assert [(row.worker_id, row.release_reason) for row in log] == [("worker-a", "cancelled")]
    record = f"{job_prefix(seeded.user.id, seeded.job.id)}/run"
    assert artifacts.read_bytes(f"{record}/env.json") and artifacts.read_bytes(f"{record}/events.jsonl")
    assert artifacts.list(f"{job_prefix(seeded.user.id, seeded.job.id)}/final") == []
