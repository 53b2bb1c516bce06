"""A worker with a Ray cluster runs jobs across machines through the Ray driver; one without leaves them queued.

The driver here is a stand-in (no Ray needed): the worker launches it exactly as it launches
`python -m tunedeck.engine.ray_launch`; it records its command line and ends with the status
the test chose, written into the outcome file as rank 0 would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.waiting import wait_until
from tunedeck.core.settings import Settings
from tunedeck.core.states import JobState
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore
from tunedeck.worker import execution
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.ray_engine import RayCluster
from tunedeck.worker.supervisor import Worker, build_context

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job

STAND_IN_DRIVER = """
import json, sys
from pathlib import Path
args = sys.argv[1:]
outcome = Path(args[args.index("--outcome") + 1])
(outcome.parent / "driver-args.json").write_text(json.dumps(args))
code = int(args[args.index("--exit") + 1])
outcome.write_text(json.dumps({"exit": code}))
sys.exit(code)
"""
CLUSTER = {"nodes": [{"node_id": "a", "cpus": 4, "gpus": 0}, {"node_id": "b", "cpus": 4, "gpus": 0}]}
ACROSS_TWO = {**TINY_JOB_CONFIG, "machines": 2, "devices": 0, "processes": 2}


def _context(tmp_path: Path, sqlite_url: str, *, with_ray: bool) -> WorkerContext:
    store = JobStore.open(sqlite_url)
    artifacts = open_store((tmp_path / "artifacts").as_uri())
    # The test reads the run folders after the jobs end: the worker's sweep keeps them.
    settings = Settings(data_dir=tmp_path / "data", database_url=sqlite_url, keep_run_folders_hours=24)
    ctx = build_context(settings, store=store, artifacts=artifacts, worker_id="ray-driver-box", devices="")
    if with_ray:  # what build_context sets from --ray-address, without probing a real cluster
        ctx.ray_address = "head:6379"
        ctx.ray_cluster = RayCluster.from_answer("head:6379", CLUSTER)
        ctx.machines = ctx.ray_cluster.machines
    ctx.fork_server = False  # a job across machines never forks from it; starting it costs seconds
    ctx.poll_s = ctx.heartbeat_s = 0.1
    return ctx


def _stand_in(monkeypatch: pytest.MonkeyPatch, exit_code: int) -> None:
    real = execution.ray_engine_command

    def command(*args: object, **kwargs: object) -> list[str]:
        return [sys.executable, "-c", STAND_IN_DRIVER, *real(*args, **kwargs)[3:], "--exit", str(exit_code)]  # type: ignore[arg-type]

    monkeypatch.setattr(execution, "ray_engine_command", command)


@pytest.mark.parametrize(("exit_code", "final"), [(0, JobState.SUCCEEDED), (5, JobState.QUEUED)])
def test_a_job_across_machines_runs_through_the_ray_driver(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, exit_code: int, final: JobState
) -> None:
    _stand_in(monkeypatch, exit_code)
    ctx = _context(tmp_path, sqlite_url, with_ray=True)
    seeded = seed_job(ctx.store, ctx.artifacts, tmp_path, chat_rows(4), config=ACROSS_TWO, name="across")
    worker = Worker(ctx)
    started: list[bool] = []
    try:
        def settled() -> bool:
            # One attempt only: a job released to the queue would be claimed again at once by
            # a further pass, so its QUEUED state would only be seen by luck (tens of seconds).
            if not started and worker.run_once():
                started.append(True)
            state = JobState(ctx.store.jobs.get(seeded.user, seeded.job.id).state)
            return state is final and not worker.running_jobs and (ctx.runs_dir / seeded.job.id).is_dir()

        wait_until(settled, f"the job to end its attempt as {final}", poll_s=0.05)
    finally:
        ctx.stop.set()
        worker.close()
    attempt = ctx.runs_dir / seeded.job.id / "attempt-1"
    args = json.loads((attempt / "driver-args.json").read_text())
    assert args[args.index("--spec") + 1] == str(attempt / "spec.json")
    assert args[args.index("--outcome") + 1] == str(attempt / "outcome.json")
    assert args[args.index("--address") + 1] == "head:6379"
    assert args[args.index("--workers") + 1] == "4"  # 2 machines x 2 processes
    assert "--use-gpu" not in args


def test_a_job_the_cluster_cannot_hold_fails_with_the_reason(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_in(monkeypatch, 0)
    ctx = _context(tmp_path, sqlite_url, with_ray=True)
    config = {**ACROSS_TWO, "processes": 8}  # the nodes have 4 CPUs each
    seeded = seed_job(ctx.store, ctx.artifacts, tmp_path, chat_rows(4), config=config, name="too-big")
    worker = Worker(ctx)
    try:
        def failed() -> bool:
            worker.run_once()
            job = ctx.store.jobs.get(seeded.user, seeded.job.id)
            return JobState(job.state) is JobState.FAILED and not worker.running_jobs

        wait_until(failed, "the job to fail", poll_s=0.05)
    finally:
        ctx.stop.set()
        worker.close()
    job = ctx.store.jobs.get(seeded.user, seeded.job.id)
    assert "cannot hold this job" in (job.error_message or "") and "2 node(s)" in (job.error_message or "")


def test_a_worker_without_ray_leaves_jobs_across_machines_queued(tmp_path: Path, sqlite_url: str) -> None:
    ctx = _context(tmp_path, sqlite_url, with_ray=False)
    assert ctx.machines == 1
    seeded = seed_job(ctx.store, ctx.artifacts, tmp_path, chat_rows(4), config=ACROSS_TWO, name="waits")
    worker = Worker(ctx)
    try:
        for _ in range(3):
            assert not worker.run_once()
    finally:
        worker.close()
    assert JobState(ctx.store.jobs.get(seeded.user, seeded.job.id).state) is JobState.QUEUED


def test_a_job_needing_more_devices_than_this_machine_goes_to_a_node_that_has_them(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stand_in(monkeypatch, 0)
    ctx = _context(tmp_path, sqlite_url, with_ray=True)
    ctx.ray_cluster = RayCluster.from_answer("head:6379", {"nodes": [{"node_id": "a", "cpus": 32, "gpus": 4}]})
    ctx.machines = 1
    assert ctx.devices == ()  # this machine has no accelerator of its own
    seeded = seed_job(ctx.store, ctx.artifacts, tmp_path, chat_rows(4), config={**TINY_JOB_CONFIG, "devices": 4},
                      name="four-gpus")  # fmt: skip
    worker = Worker(ctx)
    try:
        def succeeded() -> bool:
            worker.run_once()
            state = JobState(ctx.store.jobs.get(seeded.user, seeded.job.id).state)
            return state is JobState.SUCCEEDED and not worker.running_jobs

        wait_until(succeeded, "the job to run on the cluster", poll_s=0.05)
    finally:
        ctx.stop.set()
        worker.close()
    args = json.loads((ctx.runs_dir / seeded.job.id / "attempt-1" / "driver-args.json").read_text())
    assert args[args.index("--workers") + 1] == "4" and "--use-gpu" in args  # one Ray worker per GPU
