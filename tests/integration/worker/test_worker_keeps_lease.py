"""An attempt keeps its lease while it does slow work outside the engine (here: fetching its inputs).

Before the lease had its own thread, only the loop that supervises the engine child
heartbeated: inputs slower than the lease let it lapse, and the worker's own requeue
pass handed the job to a second attempt while the first still ran.

"Slower than the lease" is a condition here, not a sleep: the inputs are held until the
job's lease, as the store shows it, has been pushed two lifetimes past the end it had at
the claim, and the worker's requeue pass has looked at the job after that. However fast
or slow the machine, the attempt then has outlived its first lease by two whole lifetimes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until
from tunedeck.core.states import JobState
from tunedeck.storage.factory import open_store
from tunedeck.store.records import ClaimedJob
from tunedeck.store.store import JobStore
from tunedeck.store.types import utcnow
from tunedeck.worker import execution
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import Worker

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .test_worker_runs_job import run_until_terminal

# Ten heartbeats (0.3 s apart) a lease: a heartbeat thread starved for seconds on a loaded
# 2-core machine still renews it in time.
LEASE_S = 3.0
LIFETIMES = 2


def test_inputs_slower_than_the_lease_keep_the_first_attempt(
    tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = JobStore.open(sqlite_url)
    ctx = WorkerContext(
        worker_id="worker-a", store=store, artifacts=open_store((tmp_path / "artifacts").as_uri()),
        runs_dir=tmp_path / "runs", lease_s=LEASE_S, heartbeat_s=0.3, poll_s=0.1,
    )
    seeded = seed_job(store, ctx.artifacts, tiny_llama_dir, chat_rows(8), config=TINY_JOB_CONFIG)

    # Requeue passes of the worker that have ended, by the moment each began: one that began after
    # the wait below and still left the job running found its lease live at that moment.
    requeue_passes: list[datetime] = []
    requeue_expired = store.queue.requeue_expired

    def watched_requeue_expired(**kwargs: Any) -> Any:
        began = utcnow()
        moved = requeue_expired(**kwargs)
        requeue_passes.append(began)
        return moved

    monkeypatch.setattr(store.queue, "requeue_expired", watched_requeue_expired)
    outcome: list[str] = []
    prepare = execution.prepare_inputs

    def slow_prepare(store_: JobStore, artifacts: Any, claimed: ClaimedJob, *args: Any, **kwargs: Any) -> Any:
        # A large dataset or model download: held until the attempt has outlived its first lease by
        # LIFETIMES lifetimes (the lease renewed that far, a requeue pass after that left the job alone),
        # or let go at once when the lease was lost, so the checks below fail rather than wait.
        if claimed.attempt == 1:
            outlived = claimed.lease_until + timedelta(seconds=LIFETIMES * LEASE_S)

            def kept_or_lost() -> str | None:
                job = store_.jobs.get(seeded.user, claimed.job_id)
                lease_until = store_.queue.lease_until(claimed.item_id)
                if job.attempt != claimed.attempt or job.state != JobState.RUNNING.value or lease_until is None:
                    return "lost"
                if lease_until >= outlived and any(began >= outlived for began in requeue_passes):
                    return "kept"
                return None

            outcome.append(wait_until(kept_or_lost, "the lease to outlive several lifetimes", poll_s=0.05))
        return prepare(store_, artifacts, claimed, *args, **kwargs)

    monkeypatch.setattr(execution, "prepare_inputs", slow_prepare)
    state = run_until_terminal(Worker(ctx), store, seeded.user, seeded.job.id, timeout=300)
    job = store.jobs.get(seeded.user, seeded.job.id)
    assert state is JobState.SUCCEEDED, job.error_message
    assert job.attempt == 1
    assert len(store.queue.fencing_log(seeded.job.id)) == 1
    assert outcome == ["kept"]  # the inputs were held until the lease had outlived several lifetimes
    store.close()
