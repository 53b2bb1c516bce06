"""A job on two processes through the worker: torchrun launches the ranks, rank 0 reports, checkpoints commit whole.

Killing one rank while it saves fails the attempt; the checkpoint that rank never finished is
never committed, and the resumed job continues from the one before it with exactly the losses
the killed attempt had logged for the same steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunedeck.core.checkpoint_parts import missing_parts
from tunedeck.core.events import read_events
from tunedeck.core.failpoints import ENV_POINTS, ENV_STATE
from tunedeck.core.states import JobState
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore
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
    # Rank 1 dies at step 4 with its part of the checkpoint written but not marked.
    context.child_env = {ENV_POINTS: "engine_rank1_part_saved_step4", ENV_STATE: str(tmp_path / "failpoints")}
    killed = seed_job(store, artifacts, tiny_llama_dir, chat_rows(16), config=DDP_CONFIG, name="kill")
    assert killed.job.devices_needed == 0  # the CPU: nothing to reserve
    worker = Worker(context)
    assert run_until_terminal(worker, store, killed.user, killed.job.id) is JobState.FAILED
    assert [c.step for c in store.checkpoints.committed(killed.job.id)] == [2]
    first = context.runs_dir / killed.job.id / "attempt-1" / "run"
    # Rank 1's part is never marked, so checkpoint 4 is partial. Rank 0 saves at the same time and is killed
    # with the attempt, before or after marking its own part: which depends on the machine's load.
    assert 1 in missing_parts(first / "checkpoints" / "checkpoint-4", 2)
    # Rank 0 alone reports: one loss per step, steps 3 and 4 logged before rank 1 died while saving.
    before = _losses(first)
    assert sorted(before) == [1, 2, 3, 4]

    store.jobs.resume(killed.user, killed.job.id)
    assert run_until_terminal(worker, store, killed.user, killed.job.id) is JobState.SUCCEEDED
    assert sorted(c.step for c in store.checkpoints.committed(killed.job.id)) == [2, 4]
    resumed = context.runs_dir / killed.job.id / "attempt-2" / "run"
    after = _losses(resumed)
    assert sorted(after) == [3, 4]  # from checkpoint 2, the last one committed whole
    for step in (3, 4):
        assert after[step] == pytest.approx(before[step], abs=1e-5), step


def _losses(run_dir: Path) -> dict[int, float]:
    """Each step's logged loss in a run directory's events."""
    return {e["step"]: e["loss"] for e in read_events(run_dir / "events.jsonl") if e["type"] == "metric"}
