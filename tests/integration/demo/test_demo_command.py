"""`tunedeck demo` (what `make run` starts): server, embedded worker and a demo job, through the public API."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from tunedeck.cli.main import app

API = "/api/v1"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TUNEDECK_DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1",
            "COLUMNS": "200", **extra}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _read_token(process: subprocess.Popen[str], lines: list[str]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        match = re.search(r"log in with this token \(shown once\): (tdk_\S+)", line)
        if match:
            return match.group(1)
    raise AssertionError("the demo printed no login token:\n" + "".join(lines))


def _demo_jobs(port: int, token: str) -> list[dict]:
    response = httpx.get(f"http://127.0.0.1:{port}{API}/jobs", headers={"Authorization": f"Bearer {token}"},
                         timeout=5)
    response.raise_for_status()
    return [job for job in response.json()["items"] if job["name"].startswith("demo:")]


def _stop(process: subprocess.Popen[str], lines: list[str]) -> str:
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=90)
    return "".join(lines) + output


def _start_demo(tmp_path: Path, port: int) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tunedeck.cli.main", "demo", "--port", str(port)]
    return subprocess.Popen(command, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_demo_queues_a_job_that_the_embedded_worker_trains(tmp_path: Path) -> None:
    port = _free_port()
    process = _start_demo(tmp_path, port)
    lines: list[str] = []
    try:
        token = _read_token(process, lines)
        deadline = time.monotonic() + 120
        jobs: list[dict] = []
        while time.monotonic() < deadline:
            try:
                jobs = _demo_jobs(port, token)
            except httpx.TransportError:
                jobs = []
            if jobs and jobs[0]["state"] != "queued":
                break
            time.sleep(0.5)
    finally:
        output = _stop(process, lines)
    assert len(jobs) == 1, output
    assert jobs[0]["state"] in {"running", "pausing", "paused", "queued", "succeeded"}, jobs[0]
    assert jobs[0]["attempt"] >= 1, jobs[0]  # the embedded worker claimed it
    assert "demo job queued" in output

    # A second start reuses the data directory: same demo job, not a second one.
    second = _start_demo(tmp_path, port)
    second_lines: list[str] = []
    try:
        second_token = _read_token(second, second_lines)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("demo job already exists" in line for line in second_lines):
            assert second.stdout is not None
            second_lines.append(second.stdout.readline())
        jobs_after_restart = _demo_jobs(port, second_token)
    finally:
        second_output = _stop(second, second_lines)
    assert "demo job already exists" in second_output
    assert [job["id"] for job in jobs_after_restart] == [jobs[0]["id"]]
    assert second_token != token


def test_demo_never_listens_beyond_loopback(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--no-job"], env=_env(tmp_path, TUNEDECK_HOST="0.0.0.0"))
    assert result.exit_code == 1
    assert "beyond loopback" in result.output
    assert "tdk_" not in result.output
