"""Two worker processes share 20 short jobs on PostgreSQL while being SIGKILLed at random.

Every job must end in a terminal state, the fencing log must show no job held by
two workers at once, and each job must have exactly one final artifact. Each kill
hits a worker while it holds a job, so some job really is taken over after its lease
expires and the fencing check has something to check.
"""

from __future__ import annotations

import itertools
import random
import time
from pathlib import Path

import pytest

from tunedeck.core.states import JobState
from tunedeck.jobs.db import truncate_all
from tunedeck.jobs.store import JobStore
from tunedeck.storage.base import final_prefix, job_prefix
from tunedeck.storage.factory import open_store

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .worker_process import kill_worker, start_worker_process

JOBS = 20
KILLS = 4
CONFIG = {**TINY_JOB_CONFIG, "save_steps": 2}


@pytest.mark.postgres
def test_two_workers_twenty_jobs_random_kills(
    tmp_path: Path, _migrated_postgres_url: str, tiny_llama_dir: Path
) -> None:
    url = _migrated_postgres_url
    truncate_all(url)
    store = JobStore.open(url, migrate=False)
    storage_url = (tmp_path / "artifacts").as_uri()
    artifacts = open_store(storage_url)
    user = store.users.create_user("many-jobs")
    jobs = [
        # Every kill can hit the same job (a requeued job is claimed again at once): a budget above
        # the kill count keeps a job from failing on lease expiries, so each must succeed.
        seed_job(store, artifacts, tiny_llama_dir, chat_rows(8), config=CONFIG, user=user, name=f"job-{i}",
                 max_attempts=KILLS + 1).job
        for i in range(JOBS)
    ]
    rng = random.Random(7)
    workers = {
        name: start_worker_process(
            worker_id=f"{name}-0", data_dir=tmp_path, database_url=url, storage_url=storage_url, s3_endpoint=None
        )
        for name in ("a", "b")
    }
    restarts = {"a": 0, "b": 0}
    kills = 0
    deadline = time.monotonic() + 600
    next_kill = time.monotonic() + rng.uniform(8, 15)
    try:
        while time.monotonic() < deadline:
            rows = [store.jobs.get(user, job.id) for job in jobs]
            if all(JobState(row.state).is_terminal for row in rows):
                break
            holders = {row.worker_id for row in rows if row.state == JobState.RUNNING.value}
            busy = sorted(name for name in workers if f"{name}-{restarts[name]}" in holders)
            if kills < KILLS and time.monotonic() >= next_kill and busy:
                victim = rng.choice(busy)
                kill_worker(workers[victim])
                kills += 1
                restarts[victim] += 1
                workers[victim] = start_worker_process(
                    worker_id=f"{victim}-{restarts[victim]}", data_dir=tmp_path, database_url=url,
                    storage_url=storage_url, s3_endpoint=None,
                )
                next_kill = time.monotonic() + rng.uniform(6, 12)
            time.sleep(0.5)
    finally:
        for process in workers.values():
            kill_worker(process)

    assert kills == KILLS
    taken_over = [
        job.name
        for job in jobs
        if len(log := store.queue.fencing_log(job.id)) >= 2 and any(c.release_reason == "lease_expired" for c in log)
    ]
    assert taken_over, "no kill interrupted a job: the fencing check below would prove nothing"
    for job in jobs:
        row = store.jobs.get(user, job.id)
        assert JobState(row.state).is_terminal, (job.name, row.state)
        assert row.state == JobState.SUCCEEDED.value, (job.name, row.error_message)
        claims = sorted(store.queue.fencing_log(job.id), key=lambda c: c.claimed_at)
        assert claims, job.name
        for earlier, later in itertools.pairwise(claims):
            # The next claim starts only after the previous holder's lease was released or expired.
            assert earlier.released_at is not None and earlier.released_at <= later.claimed_at, job.name
        finals = [key for key in artifacts.list(job_prefix(user.id, job.id)) if key.endswith("final/MANIFEST.json")]
        assert finals == [f"{final_prefix(user.id, job.id)}/MANIFEST.json"]
        assert artifacts.verify(final_prefix(user.id, job.id))
    store.close()
