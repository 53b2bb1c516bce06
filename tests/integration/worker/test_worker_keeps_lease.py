"""An attempt keeps its lease while it does slow work outside the engine (here: fetching its inputs).

Before the lease had its own thread, only the loop that supervises the engine child
heartbeated: inputs slower than the lease let it lapse, and the worker's own requeue
pass handed the job to a second attempt while the first still ran.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tunedeck.core.states import JobState
from tunedeck.jobs.store import JobStore
from tunedeck.storage.factory import open_store
from tunedeck.worker import execution
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import Worker

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .test_worker_runs_job import run_until_terminal

LEASE_S = 1.5


def test_inputs_slower_than_the_lease_keep_the_first_attempt(
    tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JobStore.open(sqlite_url)
    ctx = WorkerContext(
        worker_id="worker-a", store=store, artifacts=open_store((tmp_path / "artifacts").as_uri()),
        runs_dir=tmp_path / "runs", lease_s=LEASE_S, heartbeat_s=0.3, poll_s=0.1,
    )
    seeded = seed_job(store, ctx.artifacts, tiny_llama_dir, chat_rows(8), config=TINY_JOB_CONFIG)
    prepare = execution.prepare_inputs

    def slow_prepare(*args: Any, **kwargs: Any) -> Any:
        time.sleep(3 * LEASE_S)  # a large dataset or model download
        return prepare(*args, **kwargs)

    monkeypatch.setattr(execution, "prepare_inputs", slow_prepare)
    state = run_until_terminal(Worker(ctx), store, seeded.user, seeded.job.id)
    job = store.jobs.get(seeded.user, seeded.job.id)
    assert state is JobState.SUCCEEDED, job.error_message
    assert job.attempt == 1
    assert len(store.queue.fencing_log(seeded.job.id)) == 1
    store.close()
