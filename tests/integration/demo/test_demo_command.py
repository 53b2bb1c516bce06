"""`tunedeck demo` (what `make run` starts): server, embedded worker and a demo job, through the public API."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from tests.fixtures.app import API
from tests.fixtures.live_server import ServerProcess, free_port, server_env, start_server
from tunedeck.cli.main import app

TOKEN_LINE = r"log in with this token \(shown once\): (tdk_\S+)"
DEMO_MODEL = Path("models") / "tiny-llama"  # where the demo keeps its model, inside the data folder
CLAIM_TIMEOUT_S = 180  # bounds a hang only: the loop ends as soon as the worker claims the job


def _demo_jobs(server: ServerProcess, token: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{server.url}{API}/jobs", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    response.raise_for_status()
    return [job for job in response.json()["items"] if job["name"].startswith("demo:")]


def test_demo_queues_a_job_that_the_embedded_worker_trains(tmp_path: Path, tiny_llama_dir: Path) -> None:
    # The demo's tiny Llama is the session's (the same builder, arguments and seed): its half-minute
    # build is not repeated here. That the demo builds it when missing: tests/unit/cli/test_demo_model.py.
    shutil.copytree(tiny_llama_dir, tmp_path / "data" / DEMO_MODEL)
    env = server_env(tmp_path / "data")
    port = free_port()
    first = start_server(["demo"], env, port)
    try:
        token = first.wait_for_line(TOKEN_LINE).group(1)
        first.wait_for_line("demo job queued")
        deadline = time.monotonic() + CLAIM_TIMEOUT_S
        jobs: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                jobs = _demo_jobs(first, token)
            except httpx.TransportError:
                jobs = []
            if jobs and jobs[0]["state"] != "queued":
                break
            time.sleep(0.5)
    finally:
        output = first.stop()
    assert len(jobs) == 1, output
    assert jobs[0]["state"] in {"running", "pausing", "paused", "queued", "succeeded"}, jobs[0]
    assert jobs[0]["attempt"] >= 1, jobs[0]  # the embedded worker claimed it

    # A second start reuses the data directory: same demo job, not a second one.
    second = start_server(["demo"], env, port)
    try:
        second_token = second.wait_for_line(TOKEN_LINE).group(1)
        second.wait_for_line("demo job already exists")
        jobs_after_restart = _demo_jobs(second, second_token)
    finally:
        second.stop()
    assert [job["id"] for job in jobs_after_restart] == [jobs[0]["id"]]
    assert second_token != token


def test_demo_never_listens_beyond_loopback(tmp_path: Path) -> None:
    env = server_env(tmp_path / "data", TUNEDECK_HOST="0.0.0.0")
    result = CliRunner().invoke(app, ["demo", "--no-job"], env=env)
    assert result.exit_code == 1
    assert "beyond loopback" in result.output
    assert "tdk_" not in result.output
