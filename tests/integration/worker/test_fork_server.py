"""Runs forked from the fork server behave as fresh engine children: exit codes, output, kill, restart, fallback."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, write_chat
from tests.waiting import HANG_S
from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.states import JobState
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore
from tunedeck.worker import supervisor
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.fork_server_client import KILLED, ForkServerClient
from tunedeck.worker.supervisor import Worker

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .test_worker_runs_job import run_until_terminal


@pytest.fixture
def server(tmp_path: Path) -> ForkServerClient:
    client = ForkServerClient.start({}, tmp_path / "fork-server.log")
    yield client
    client.close()


def _spec(tmp_path: Path, model: Path, name: str, **overrides: object) -> Path:
    train = write_chat(tmp_path, 8, name=f"{name}.jsonl")
    spec = RunSpec(fast_config(preflight=False, **overrides), ModelRef(str(model)), train, tmp_path / name)
    path = tmp_path / f"{name}-spec.json"
    path.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
    return path


def test_a_forked_run_trains_and_a_bad_spec_is_refused_with_its_output(
    server: ForkServerClient, tmp_path: Path, tiny_llama_dir: Path
) -> None:
    bad = tmp_path / "bad-spec.json"
    bad.write_text("{}", encoding="utf-8")
    refused = server.launch(bad, tmp_path / "bad.log")
    assert refused is not None
    assert refused.wait(timeout=300) == ExitCode.REFUSED
    assert any("run spec" in line for line in refused.last_lines())

    # Two runs at once, each with its own log, both from the one server.
    runs = [server.launch(_spec(tmp_path, tiny_llama_dir, name), tmp_path / f"{name}.log") for name in ("a", "b")]
    assert all(run is not None for run in runs)
    assert len({run.pid for run in runs if run}) == 2
    for name, run in zip(("a", "b"), runs, strict=True):
        assert run is not None and run.wait(timeout=300) == ExitCode.SUCCEEDED, run.last_lines() if run else None
        assert json.loads((tmp_path / name / "results.json").read_text())["status"] == "succeeded"
        assert json.loads(run.last_lines(1)[0])["status"] == "succeeded"  # the child's own last line


def test_a_killed_run_reports_sigkill_and_a_closed_server_serves_nothing(
    server: ForkServerClient, tmp_path: Path, tiny_llama_dir: Path
) -> None:
    run = server.launch(_spec(tmp_path, tiny_llama_dir, "long", epochs=200), tmp_path / "long.log")
    assert run is not None
    deadline = time.monotonic() + 120
    while not (tmp_path / "long" / "events.jsonl").is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run.poll() is None
    run.kill()
    assert run.wait(timeout=30) == KILLED
    with pytest.raises(ProcessLookupError):
        os.kill(run.pid, 0)  # reaped by the server, not left as a zombie
    server.close()
    assert not server.alive
    assert server.launch(tmp_path / "any.json", tmp_path / "any.log") is None  # the caller starts the run afresh


def _kill_server(server: ForkServerClient) -> None:
    """SIGKILL the server process, as the kernel's out-of-memory killer would, and wait for the client to see it."""
    server._process.kill()
    deadline = time.monotonic() + HANG_S
    while server.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.alive


def test_a_worker_forks_its_jobs_restarts_a_dead_server_then_falls_back_to_fresh_runs(
    tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor, "FORK_SERVER_RESTARTS", 1)
    store = JobStore.open(sqlite_url)
    ctx = WorkerContext(
        worker_id="worker-a", store=store, artifacts=open_store((tmp_path / "artifacts").as_uri()),
        runs_dir=tmp_path / "runs", lease_s=30, heartbeat_s=0.5, poll_s=0.1, fork_server=True,
    )
    worker = Worker(ctx)
    servers: list[ForkServerClient] = []
    try:
        for name in ("first", "second", "after-a-death", "after-the-last-restart"):
            if name == "after-a-death":
                (first_server,) = servers
                assert first_server.served == 2  # both earlier jobs were forked
                _kill_server(first_server)  # the next job is forked by a server started again
            if name == "after-the-last-restart":
                assert worker.fork_server_restarts == 1 and servers[1].served == 1
                _kill_server(servers[1])  # no restart left: the next job starts afresh
            seeded = seed_job(store, ctx.artifacts, tiny_llama_dir, chat_rows(4), config=TINY_JOB_CONFIG, name=name)
            state = run_until_terminal(worker, store, seeded.user, seeded.job.id)
            assert state is JobState.SUCCEEDED, store.jobs.get(seeded.user, seeded.job.id).error_message
            log = (ctx.runs_dir / seeded.job.id / "attempt-1" / "engine.log").read_text(encoding="utf-8")
            assert '"status": "succeeded"' in log
            if worker._fork_server is not None and worker._fork_server not in servers:
                servers.append(worker._fork_server)
    finally:
        worker.close()
    assert len(servers) == 2 and worker.fork_server_restarts == 1
    assert [server.served for server in servers] == [2, 1]
    store.close()


def test_a_run_that_dies_with_its_server_goes_back_to_the_queue_and_resumes(
    tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path
) -> None:
    store = JobStore.open(sqlite_url)
    ctx = WorkerContext(
        worker_id="worker-a", store=store, artifacts=open_store((tmp_path / "artifacts").as_uri()),
        runs_dir=tmp_path / "runs", lease_s=30, heartbeat_s=0.5, poll_s=0.1, fork_server=True,
    )
    worker = Worker(ctx)
    config = {**TINY_JOB_CONFIG, "epochs": 40, "save_steps": 2}  # 80 steps: still training when the server dies
    seeded = seed_job(store, ctx.artifacts, tiny_llama_dir, chat_rows(4), config=config, name="long")
    try:
        deadline = time.monotonic() + 180
        while not store.checkpoints.committed(seeded.job.id):
            assert time.monotonic() < deadline, "no checkpoint committed"
            worker.run_once()
            time.sleep(0.2)
        server = worker._fork_server
        assert server is not None and server.served == 1
        _kill_server(server)
        state = run_until_terminal(worker, store, seeded.user, seeded.job.id)
        job = store.jobs.get(seeded.user, seeded.job.id)
        assert state is JobState.SUCCEEDED, job.error_message
        assert job.attempt == 2  # the lost attempt was handed back, not failed
        assert worker.fork_server_restarts == 1 and worker._fork_server is not server
        assert worker._fork_server.served == 1  # the second attempt was forked by the new server
        events = store.telemetry.list_events(seeded.user, seeded.job.id, limit=5000, types=["metric"])
        first_steps = {attempt: min(e.payload["step"] for e in events if e.attempt == attempt) for attempt in (1, 2)}
        assert first_steps[1] == 1 and first_steps[2] > 2  # attempt 2 resumed from a committed checkpoint
    finally:
        worker.close()
    losses = store.telemetry.series(seeded.user, seeded.job.id, "loss", max_points=1000)
    assert [step for step, _ in losses] == list(range(1, 81))
    store.close()
