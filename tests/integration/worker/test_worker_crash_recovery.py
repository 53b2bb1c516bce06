"""A job SIGKILLed (worker and engine child together) at many points completes with the exact trace.

Kill points, in the order the run meets them: the engine has written a checkpoint
but no event names it; the worker saw the checkpoint event but uploaded nothing;
mid-upload (some files in S3, no manifest); after the manifest but before the
database row; after the row; and mid-step, killed from outside. After each kill
a new worker process takes the job once its lease expires.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from tunedeck.core.states import JobState
from tunedeck.jobs.store import JobStore
from tunedeck.storage.factory import open_store

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .worker_process import kill_worker, start_worker_process

FAILPOINTS = (
    "engine_checkpoint_saved",
    "worker_before_upload",
    "storage_mid_upload",
    "worker_after_manifest",
    "worker_after_commit",
)
CONFIG = {**TINY_JOB_CONFIG, "save_steps": 4, "lr_scheduler": "cosine", "warmup_ratio": 0.1}
ROWS = 40  # batch 2: 20 steps


def _run_job_through_crashes(
    tmp: Path, database_url: str, storage_url: str, s3: str, store: JobStore, user, job_id: str,
    *, failpoints: str, kill_mid_step_at: int | None,
) -> list[int]:
    """Start workers until the job ends; returns the exit codes of the worker processes."""
    codes: list[int] = []
    mid_step_done = kill_mid_step_at is None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        worker_id = f"w{len(codes)}"
        process = start_worker_process(
            worker_id=worker_id, data_dir=tmp, database_url=database_url, storage_url=storage_url,
            s3_endpoint=s3, failpoints=failpoints,
        )
        while process.poll() is None:
            job = store.jobs.get(user, job_id)
            if JobState(job.state).is_terminal:
                kill_worker(process)
                break
            if not mid_step_done and job.worker_id == worker_id and store.checkpoints.committed(job_id):
                # Only this attempt's progress counts: earlier attempts' steps are already stored.
                events = store.telemetry.list_events(user, job_id, types=["metric"], limit=5000)
                steps = [e.payload["step"] for e in events if e.attempt == job.attempt]
                if steps and max(steps) >= kill_mid_step_at:
                    kill_worker(process)
                    mid_step_done = True
                    break
            time.sleep(0.2)
        codes.append(process.wait())
        if JobState(store.jobs.get(user, job_id).state).is_terminal:
            return codes
    raise AssertionError(f"job did not finish; worker exit codes {codes}")


def test_sigkill_at_every_point_resumes_to_the_same_trace(
    tmp_path: Path, sqlite_url: str, s3_store_url: str, s3_server: str, tiny_llama_dir: Path
) -> None:
    store = JobStore.open(sqlite_url)
    artifacts = open_store(s3_store_url, s3_endpoint_url=s3_server)
    crashed = seed_job(store, artifacts, tiny_llama_dir, chat_rows(ROWS), config=CONFIG, name="crashed")
    # Enough attempts for every kill (each one is a lease that expired).
    with store.db.write() as session:
        from tunedeck.jobs.models import Job

        session.get(Job, crashed.job.id).max_attempts = 20

    (tmp_path / "crash").mkdir()
    codes = _run_job_through_crashes(
        tmp_path / "crash", sqlite_url, s3_store_url, s3_server, store, crashed.user, crashed.job.id,
        failpoints=",".join(FAILPOINTS), kill_mid_step_at=10,
    )
    fired = sorted(p.name for p in (tmp_path / "crash" / "failpoints").iterdir())
    assert fired == sorted(FAILPOINTS)
    assert codes.count(-9) >= len(FAILPOINTS) + 1  # every failpoint and the mid-step kill
    job = store.jobs.get(crashed.user, crashed.job.id)
    assert job.state == JobState.SUCCEEDED.value, job.error_message

    # The uninterrupted run of the same job, queued only now so the crashing workers never took it.
    reference = seed_job(
        store, artifacts, tiny_llama_dir, chat_rows(ROWS), config=CONFIG, user=crashed.user, name="reference"
    )
    (tmp_path / "ref").mkdir()
    _run_job_through_crashes(
        tmp_path / "ref", sqlite_url, s3_store_url, s3_server, store, crashed.user, reference.job.id,
        failpoints="", kill_mid_step_at=None,
    )
    assert store.jobs.get(crashed.user, reference.job.id).state == JobState.SUCCEEDED.value

    for name in ("loss", "learning_rate", "grad_norm"):
        got = store.telemetry.series(crashed.user, crashed.job.id, name, max_points=1000)
        want = store.telemetry.series(crashed.user, reference.job.id, name, max_points=1000)
        assert [s for s, _ in got] == list(range(1, 21)), name  # no step missing or duplicated
        assert [s for s, _ in want] == list(range(1, 21)), name
        for (step, a), (_, b) in zip(got, want, strict=True):
            assert math.isclose(a, b, rel_tol=0, abs_tol=1e-6), (name, step, a, b)

    # Exactly one final artifact, and every claim recorded.
    assert artifacts.verify(f"users/{crashed.user.id}/jobs/{crashed.job.id}/final")
    assert len(store.queue.fencing_log(crashed.job.id)) == len(codes)
