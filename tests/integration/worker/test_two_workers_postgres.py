"""Two worker processes share 10 short jobs on PostgreSQL while being SIGKILLed at random.

Every job must end in a terminal state, the fencing log must show no job held by
two workers at once, and each job must have exactly one final artifact. Each kill
hits a worker while it holds a job that already committed a checkpoint, so that job
really is taken over after its lease expires, resumes from the checkpoint, and the
fencing check has something to check.

No kill waits on a timer. While kills remain, every run is held at its third step
(the engine's step holdpoint), after its step-2 checkpoint was saved: no job can end,
and "a worker holding a job with a committed checkpoint" is a state that lasts until
the test acts on it, however fast or slow the machine. So exactly KILLS kills always
land while jobs remain; then the hold is lifted and all the jobs run to their end.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import time
from pathlib import Path

import pytest

from tests.waiting import wait_until, wait_while_progressing
from tunedeck.core.failpoints import ENV_HOLDS, hold_gate
from tunedeck.core.states import JobState
from tunedeck.storage.base import final_prefix, job_prefix
from tunedeck.storage.factory import open_store
from tunedeck.store.db import truncate_all
from tunedeck.store.store import JobStore

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .worker_process import kill_worker, start_worker_process

# Five jobs for each worker: every kill finds jobs still queued behind the held ones, and each
# worker claims many times over, so claims interleave on the queue as they would with more.
JOBS = 10
KILLS = 4
# 8 rows in batches of 2: steps 1-4, checkpoints at steps 2 and 4.
CONFIG = {**TINY_JOB_CONFIG, "save_steps": 2}
HOLDPOINT = "engine_step_end"
HOLD_FROM_STEP = 3  # the step-2 checkpoint is saved; the run cannot finish
# Bounds on a hang, not on speed: the wait for one kill's victim (a worker start, a lease
# expiry, a claim, a few training steps), and a stretch with no job changing state.
VICTIM_WITHIN_S = 300.0
STALL_S = 300.0


@pytest.mark.postgres
@pytest.mark.timeout(3600)  # the run scales with the machine; the waits below bound a hang
def test_two_workers_ten_jobs_random_kills(
    tmp_path: Path, _migrated_postgres_url: str, tiny_llama_dir: Path
) -> None:
    url = _migrated_postgres_url
    truncate_all(url)
    store = JobStore.open(url, migrate=False)
    storage_url = (tmp_path / "artifacts").as_uri()
    artifacts = open_store(storage_url)
    user = store.users.create_user("many-jobs")
    jobs = [
        # Every kill can hit the same job (a requeued job is claimed again at once), and a loaded
        # machine may let a lease lapse on its own: a budget well above the kill count keeps a job
        # from failing on lease expiries, so each must succeed.
        seed_job(store, artifacts, tiny_llama_dir, chat_rows(8), config=CONFIG, user=user, name=f"job-{i}",
                 max_attempts=KILLS + 4).job
        for i in range(JOBS)
    ]
    holds = tmp_path / "holds"
    holds.mkdir()
    gate = hold_gate(holds, HOLDPOINT)
    gate.write_text(str(HOLD_FROM_STEP), encoding="utf-8")  # before any worker starts: every run holds

    def start(worker_id: str) -> subprocess.Popen[bytes]:
        return start_worker_process(
            worker_id=worker_id, data_dir=tmp_path, database_url=url, storage_url=storage_url, s3_endpoint=None,
            failpoint_state=holds, extra_env={ENV_HOLDS: HOLDPOINT},
        )

    def held_jobs() -> list[tuple[str, str]]:
        """(worker name, job id) for each job a live worker holds and that has a committed checkpoint."""
        live = {f"{name}-{restarts[name]}": name for name in workers}
        rows = [store.jobs.get(user, job.id) for job in jobs]
        assert not all(JobState(row.state).is_terminal for row in rows)  # held runs cannot end
        return sorted(
            (live[row.worker_id], row.id)
            for row in rows
            if row.state == JobState.RUNNING.value and row.worker_id in live and store.checkpoints.committed(row.id)
        )

    def progress() -> tuple[tuple[str, int], ...]:
        rows = [store.jobs.get(user, job.id) for job in jobs]
        return tuple((row.state, row.attempt) for row in rows)

    rng = random.Random(7)
    workers = {name: start(f"{name}-0") for name in ("a", "b")}
    restarts = {"a": 0, "b": 0}
    killed: list[tuple[str, str]] = []  # (worker id, job id it held when killed)
    try:
        while len(killed) < KILLS:
            candidates = wait_until(
                held_jobs, f"a worker holding a job with a committed checkpoint (kill {len(killed) + 1})",
                timeout_s=VICTIM_WITHIN_S, poll_s=0.2,
            )
            victim, job_id = rng.choice(candidates)
            time.sleep(rng.uniform(0, 1))  # variety only: the held state does not change meanwhile
            if (victim, job_id) not in held_jobs():
                continue  # its lease lapsed on its own meanwhile (a stalled machine): pick again
            kill_worker(workers[victim])
            killed.append((f"{victim}-{restarts[victim]}", job_id))
            restarts[victim] += 1
            workers[victim] = start(f"{victim}-{restarts[victim]}")
        gate.unlink()  # every held run goes on; no job could end before this
        wait_while_progressing(
            lambda: all(JobState(state).is_terminal for state, _ in progress()),
            progress, "every job to end", stall_s=STALL_S,
        )
    finally:
        gate.unlink(missing_ok=True)
        for process in workers.values():
            kill_worker(process)

    assert len(killed) == KILLS
    taken_over = [
        job.name
        for job in jobs
        if len(log := store.queue.fencing_log(job.id)) >= 2 and any(c.release_reason == "lease_expired" for c in log)
    ]
    assert taken_over, "no kill interrupted a job: the fencing check below would prove nothing"
    for worker_id, job_id in killed:
        # The killed worker's claim ended by lease expiry, and the attempt that took over resumed.
        log = store.queue.fencing_log(job_id)
        assert any(c.worker_id == worker_id and c.release_reason == "lease_expired" for c in log), (worker_id, log)
        assert store.jobs.get(user, job_id).resume_from_step is not None, job_id
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
