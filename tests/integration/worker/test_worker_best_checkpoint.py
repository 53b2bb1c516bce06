"""Retention keeps the best checkpoint across attempts: a resume must not crown its first evaluation."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from tests.fixtures.job_claims import claim_job
from tunedeck.storage.factory import open_store
from tunedeck.store.records import ClaimedJob
from tunedeck.store.store import JobStore
from tunedeck.store.types import utcnow
from tunedeck.worker.background_commits import PendingCheckpoint
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.execution import JobExecution


def _commit(execution: JobExecution, tmp: Path, step: int, eval_loss: float) -> None:
    """Commit a checkpoint as the worker does after the engine's checkpoint event."""
    folder = tmp / f"attempt-{execution.job.attempt}" / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(f"weights at {step}".encode())
    execution._commit_checkpoint(PendingCheckpoint(step=step, path=folder, metrics={"eval_loss": eval_loss}))


def _claim(store: JobStore) -> ClaimedJob:
    claimed = claim_job(store, "worker-a", devices=0, lease_s=30)
    assert claimed is not None
    return claimed


def test_best_checkpoint_survives_a_resume(tmp_path: Path, sqlite_url: str) -> None:
    store = JobStore.open(sqlite_url)
    artifacts = open_store((tmp_path / "artifacts").as_uri())
    ctx = WorkerContext(
        worker_id="worker-a", store=store, artifacts=artifacts, runs_dir=tmp_path / "runs", keep_checkpoints=1
    )
    user = store.users.create_user("alice")
    job = store.jobs.enqueue(user, name="ranked", config={"epochs": 1, "metric_for_best_model": "loss"})

    first = JobExecution(ctx, _claim(store))
    _commit(first, tmp_path, 4, eval_loss=0.5)
    _commit(first, tmp_path, 8, eval_loss=0.9)  # worse, but the newest: both kept
    # The worker dies; its lease expires and the next attempt resumes from step 8.
    store.queue.requeue_expired(now=utcnow() + timedelta(minutes=5))
    resumed = JobExecution(ctx, _claim(store))
    assert resumed.job.attempt == 2 and resumed.job.resume_from is not None
    _commit(resumed, tmp_path, 12, eval_loss=0.7)  # better than step 8, worse than step 4

    rows = {row.step: row for row in store.checkpoints.committed(job.id)}
    assert sorted(rows) == [4, 12]  # the newest and the best; step 8 pruned
    assert rows[4].is_best and not rows[12].is_best
    old_best = rows[4].storage_prefix
    assert artifacts.verify(old_best)

    _commit(resumed, tmp_path, 16, eval_loss=0.3)  # a real improvement takes the flag
    rows = {row.step: row for row in store.checkpoints.committed(job.id)}
    assert sorted(rows) == [16] and rows[16].is_best
    assert not artifacts.list(old_best)  # the former best's files went with its row
    store.close()
