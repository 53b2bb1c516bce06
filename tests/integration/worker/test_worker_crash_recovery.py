"""A job SIGKILLed (worker and engine child together) at many points completes with the exact trace.

Kill points, in the order the run meets them: the engine is writing a checkpoint
(weights on disk, optimizer state not yet); mid-upload (some files in S3, no
manifest); after the manifest but before the database row; after the row; and
mid-step, killed from outside. After each kill a new worker process takes the job
once its lease expires, and must resume from the checkpoint the queue handed it,
not from step 0.

Each kill costs a lease expiry and a worker start, so the kill points are a sample
that keeps the boundaries of a checkpoint's life: before any part of it is complete,
in the middle of its commit, with its manifest but no row, and with its row. The
points between those (a saved checkpoint no event names yet, an event with nothing
uploaded) leave the same state for the next attempt as the first two: no manifest,
so nothing to resume from.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from tunedeck.core.states import JobState
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .worker_process import kill_worker, start_worker_process, with_failpoint_hooks

FAILPOINTS = (
    "engine_mid_checkpoint_save",  # test-only, in failpoint_hooks/: inside the trainer's save
    "storage_mid_upload",
    "worker_after_manifest",
    "worker_after_commit",
)
CONFIG = {**TINY_JOB_CONFIG, "save_steps": 4, "lr_scheduler": "cosine", "warmup_ratio": 0.1}
ROWS = 40  # batch 2: 20 steps


def _run_job_through_crashes(
    tmp: Path, database_url: str, storage_url: str, s3: str, store: JobStore, user, job_id: str,
    *, failpoints: str, kill_mid_step: bool, resumes: dict[int, int | None] | None = None,
) -> list[int]:
    """Start workers until the job ends; returns the exit codes of the worker processes.

    `kill_mid_step`: once an attempt that resumed from a committed checkpoint has trained
    past it, SIGKILL its worker from outside. `resumes` collects, per attempt, the
    checkpoint step the queue told that attempt to resume from.
    """
    codes: list[int] = []
    mid_step_done = not kill_mid_step
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        worker_id = f"w{len(codes)}"
        process = start_worker_process(
            worker_id=worker_id, data_dir=tmp, database_url=database_url, storage_url=storage_url,
            s3_endpoint=s3, failpoints=failpoints, extra_env=with_failpoint_hooks(),
        )
        while process.poll() is None:
            job = store.jobs.get(user, job_id)
            if resumes is not None and job.state == JobState.RUNNING.value:
                # Set at claim and kept until the next claim, which a lease expiry (>= 3 s) precedes.
                resumes.setdefault(job.attempt, job.resume_from_step)
            if JobState(job.state).is_terminal:
                kill_worker(process)
                break
            resumed_from = job.resume_from_step
            if not mid_step_done and job.worker_id == worker_id and resumed_from is not None:
                # The engine's own events file, not the database: the worker ingests it only every
                # half second, and a resumed tiny run can reach its end in less.
                steps = _metric_steps(tmp / "runs" / job_id / f"attempt-{job.attempt}" / "run" / "events.jsonl")
                if steps and max(steps) > resumed_from:
                    kill_worker(process)
                    mid_step_done = True
                    break
            time.sleep(0.05)
        codes.append(process.wait())
        if JobState(store.jobs.get(user, job_id).state).is_terminal:
            assert mid_step_done, "the job ended before the mid-step kill: it tests nothing"
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
        from tunedeck.store.models import Job

        session.get(Job, crashed.job.id).max_attempts = 20

    (tmp_path / "crash").mkdir()
    resumes: dict[int, int | None] = {}
    codes = _run_job_through_crashes(
        tmp_path / "crash", sqlite_url, s3_store_url, s3_server, store, crashed.user, crashed.job.id,
        failpoints=",".join(FAILPOINTS), kill_mid_step=True, resumes=resumes,
    )
    fired = sorted(p.name for p in (tmp_path / "crash" / "failpoints").iterdir())
    assert fired == sorted(FAILPOINTS)
    assert codes.count(-9) >= len(FAILPOINTS) + 1  # every failpoint and the mid-step kill
    job = store.jobs.get(crashed.user, crashed.job.id)
    assert job.state == JobState.SUCCEEDED.value, job.error_message

    # The first kill came inside the save: the weights were on disk, the trainer state never was.
    half_saved = tmp_path / "crash" / "runs" / crashed.job.id / "attempt-1" / "run" / "checkpoints" / "checkpoint-4"
    assert (half_saved / "adapter_model.safetensors").is_file()
    assert not (half_saved / "trainer_state.json").exists()

    # Every attempt trained from the checkpoint its claim named: its first step is that step + 1.
    assert sorted(resumes) == list(range(1, len(codes) + 1))
    resumed = [step for step in resumes.values() if step is not None]
    # Step 4 was committed by the attempt killed after its row; the later attempts resume from it or newer.
    assert len(resumed) >= 2 and resumed[0] == 4 and resumed == sorted(resumed), (sorted(resumes.items()), codes)
    started = _attempt_starts(store, crashed.user, crashed.job.id)
    # A kill can take an attempt's last events with it (the worker had not ingested them yet);
    # the last attempt, which resumed and finished, has them all.
    assert resumes[max(resumes)] is not None and max(resumes) in started
    for attempt, (engine_resume, first_step) in started.items():
        resume_step = resumes[attempt]
        assert engine_resume == resume_step, (attempt, engine_resume, resume_step)
        assert first_step == (resume_step or 0) + 1, (attempt, first_step, resume_step)

    # The uninterrupted run of the same job, queued only now so the crashing workers never took it.
    reference = seed_job(
        store, artifacts, tiny_llama_dir, chat_rows(ROWS), config=CONFIG, user=crashed.user, name="reference"
    )
    (tmp_path / "ref").mkdir()
    _run_job_through_crashes(
        tmp_path / "ref", sqlite_url, s3_store_url, s3_server, store, crashed.user, reference.job.id,
        failpoints="", kill_mid_step=False,
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


def _attempt_starts(store: JobStore, user, job_id: str) -> dict[int, tuple[int | None, int]]:
    """Per attempt, from its own events: the checkpoint step the engine resumed from, and its first metric step."""
    events = store.telemetry.list_events(user, job_id, types=["phase", "metric"], limit=5000)
    resumed: dict[int, int | None] = {}
    first: dict[int, int] = {}
    for event in events:
        payload = event.payload
        if event.type == "phase" and payload.get("name") == "training" and payload.get("status") == "started":
            path = payload.get("resume_from")
            resumed[event.attempt] = int(Path(path).name.removeprefix("checkpoint-")) if path else None
        elif event.type == "metric":
            first[event.attempt] = min(first.get(event.attempt, payload["step"]), payload["step"])
    return {attempt: (resumed.get(attempt), first[attempt]) for attempt in first}


def _metric_steps(events_file: Path) -> list[int]:
    """Steps of the metric events the engine has written so far (a line being written is skipped)."""
    if not events_file.is_file():
        return []
    steps = []
    for line in events_file.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("type") == "metric":
            steps.append(int(event["step"]))
    return steps
