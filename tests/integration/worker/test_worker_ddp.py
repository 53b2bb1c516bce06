"""A job on two processes through the worker: torchrun launches the ranks, rank 0 reports, checkpoints commit whole.

Killing one rank while it saves fails the attempt; the checkpoint that rank never finished is
never committed, and the resumed job continues from the one before it with the losses of a
run that was never interrupted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunedeck.core.checkpoint_parts import missing_parts
from tunedeck.core.failpoints import ENV_POINTS, ENV_STATE
from tunedeck.core.states import JobState
from tunedeck.jobs.store import JobStore
from tunedeck.storage.factory import open_store
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import Worker

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .test_worker_runs_job import run_until_terminal

pytestmark = pytest.mark.slow

# 16 rows, micro-batch 2 on each of 2 processes: 4 steps, a checkpoint every 2.
DDP_CONFIG = {**TINY_JOB_CONFIG, "devices": 0, "processes": 2, "save_steps": 2}


@pytest.fixture
def context(tmp_path: Path, sqlite_url: str) -> WorkerContext:
    return WorkerContext(
        worker_id="worker-ddp",
        store=JobStore.open(sqlite_url),
        artifacts=open_store((tmp_path / "artifacts").as_uri()),
        runs_dir=tmp_path / "runs",
        lease_s=30.0,
        heartbeat_s=0.5,
        poll_s=0.1,
    )


def test_a_killed_rank_leaves_no_partial_checkpoint_and_the_job_resumes_exactly(
    context: WorkerContext, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    store, artifacts = context.store, context.artifacts
    whole = seed_job(store, artifacts, tiny_llama_dir, chat_rows(16), config=DDP_CONFIG, name="whole")
    assert whole.job.devices_needed == 0  # the CPU: nothing to reserve
    worker = Worker(context)
    assert run_until_terminal(worker, store, whole.user, whole.job.id) is JobState.SUCCEEDED
    expected = dict(store.telemetry.series(whole.user, whole.job.id, "loss", max_points=100))
    assert sorted(expected) == [1, 2, 3, 4]  # rank 0 alone reports: one loss per step
    assert sorted(c.step for c in store.checkpoints.committed(whole.job.id)) == [2, 4]

    # Rank 1 dies at step 4 with its part of the checkpoint written but not marked.
    context.child_env = {ENV_POINTS: "engine_rank1_part_saved_step4", ENV_STATE: str(tmp_path / "failpoints")}
    killed = seed_job(store, artifacts, tiny_llama_dir, chat_rows(16), config=DDP_CONFIG, user=whole.user, name="kill")
    assert run_until_terminal(worker, store, killed.user, killed.job.id) is JobState.FAILED
    assert [c.step for c in store.checkpoints.committed(killed.job.id)] == [2]
    on_disk = context.runs_dir / killed.job.id / "attempt-1" / "run" / "checkpoints" / "checkpoint-4"
    assert missing_parts(on_disk, 2) == [1]

    store.jobs.resume(killed.user, killed.job.id)
    assert run_until_terminal(worker, store, killed.user, killed.job.id) is JobState.SUCCEEDED
    resumed = dict(store.telemetry.series(killed.user, killed.job.id, "loss", max_points=100))
    for step in (3, 4):
        assert resumed[step] == pytest.approx(expected[step], abs=1e-5), step
