"""A worker claims a job, trains a tiny model in a child process, commits checkpoints to S3 and finishes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tunedeck.core.states import JobState
from tunedeck.storage.base import final_prefix
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import Worker

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job


def run_until_terminal(worker: Worker, store: JobStore, user, job_id: str, timeout: float = 240.0) -> JobState:
    """Drive the worker loop in this thread until the job ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worker.run_once()
        state = JobState(store.jobs.get(user, job_id).state)
        if state.is_terminal or state is JobState.PAUSED:
            for thread in list(worker._running.values()):
                thread.join(timeout=60)
            return JobState(store.jobs.get(user, job_id).state)
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish in {timeout}s")


@pytest.fixture
def s3_context(tmp_path: Path, sqlite_url: str, s3_store_url: str, s3_server: str) -> WorkerContext:
    store = JobStore.open(sqlite_url)
    return WorkerContext(
        worker_id="worker-a",
        store=store,
        artifacts=open_store(s3_store_url, s3_endpoint_url=s3_server),
        runs_dir=tmp_path / "runs",
        lease_s=20.0,
        heartbeat_s=0.5,
        poll_s=0.1,
    )


def test_job_trains_commits_checkpoints_to_s3_and_succeeds(
    s3_context: WorkerContext, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    store, artifacts = s3_context.store, s3_context.artifacts
    config = {**TINY_JOB_CONFIG, "preflight": True, "eval_strategy": "steps", "eval_steps": 4}
    seeded = seed_job(store, artifacts, tiny_llama_dir, chat_rows(16), config=config, validation_rows=chat_rows(4))
    state = run_until_terminal(Worker(s3_context), store, seeded.user, seeded.job.id)
    job = store.jobs.get(seeded.user, seeded.job.id)
    assert state is JobState.SUCCEEDED, job.error_message

    # 16 rows / batch 2 = 8 steps, one metric event per step.
    losses = store.telemetry.series(seeded.user, seeded.job.id, "loss", max_points=100)
    assert [step for step, _ in losses] == list(range(1, 9))
    assert losses[-1][1] < losses[0][1]

    # Checkpoints at steps 4 and 8, committed with a verifying manifest in S3.
    committed = store.checkpoints.committed(seeded.job.id)
    assert sorted(c.step for c in committed) == [4, 8]
    for checkpoint in committed:
        assert artifacts.verify(checkpoint.storage_prefix)
        assert checkpoint.manifest_sha256 == artifacts.read_manifest(checkpoint.storage_prefix).digest

    # The final adapter is in storage and downloads whole.
    final = final_prefix(seeded.user.id, seeded.job.id)
    assert artifacts.verify(final)
    downloaded = tmp_path / "final-download"
    artifacts.download_directory(final, downloaded)
    assert (downloaded / "adapter_model.safetensors").is_file()

    # The job's record: preflight first, then the baseline and final evaluations with one procedure.
    record = f"users/{seeded.user.id}/jobs/{seeded.job.id}/run"
    preflight = json.loads(artifacts.read_bytes(f"{record}/preflight.json"))
    assert len(preflight["checks"]) == 10
    baseline = json.loads(artifacts.read_bytes(f"{record}/baseline_eval.json"))
    final_eval = json.loads(artifacts.read_bytes(f"{record}/final_eval.json"))
    assert baseline["procedure_sha256"] == final_eval["procedure_sha256"]
    assert final_eval["metrics"]["eval_loss"] < baseline["metrics"]["eval_loss"]
    phases = [
        (e.payload["name"], e.payload["status"])
        for e in store.telemetry.list_events(seeded.user, seeded.job.id, types=["phase"])
    ]
    assert phases[0] == ("preflight", "completed")
    assert phases.index(("baseline_eval", "completed")) < phases.index(("training", "started"))
    assert ("final_eval", "completed") in phases

    # The base model row is pinned to the fingerprint the engine loaded.
    base = store.base_models.get(seeded.user, job.base_model_id)
    assert base.resolved is not None and len(base.resolved) == 64

    # Every claim is in the fencing log and ended when the job finished.
    log = store.queue.fencing_log(seeded.job.id)
    assert [(row.worker_id, row.attempt) for row in log] == [("worker-a", 1)]
