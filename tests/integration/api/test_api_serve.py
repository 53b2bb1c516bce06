"""`tunedeck serve`: refuses to listen beyond loopback, bootstraps an admin once, serves the API."""

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

from tests.integration.api.conftest import API
from tunedeck.cli.main import app


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TUNEDECK_DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


def test_non_loopback_host_is_refused(tmp_path: Path) -> None:
    runner = CliRunner()
    env = _env(tmp_path)
    refused = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--workers", "0"], env=env)
    assert refused.exit_code == 1
    assert "--allow-remote" in refused.output
    first_start = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--allow-remote", "--workers", "0"], env=env)
    assert first_start.exit_code == 1
    assert "first start" in first_start.output
    assert "tdk_" not in refused.output + first_start.output  # no admin was bootstrapped


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(tmp_path: Path, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tunedeck.cli.main", "serve", "--port", str(port), "--workers", "0"],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_healthy(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            if httpx.get(f"http://127.0.0.1:{port}{API}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("server did not become healthy in 30 s")


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    return output


def test_first_start_prints_an_admin_token_once_and_serves(tmp_path: Path) -> None:
    port = _free_port()
    process = _start(tmp_path, port)
    try:
        _wait_healthy(port, process)
        me_unauthenticated = httpx.get(f"http://127.0.0.1:{port}{API}/me")
    finally:
        output = _stop(process)
    assert me_unauthenticated.status_code == 401
    match = re.search(r"API token \(shown once, keep it\): (tdk_\S+)", output)
    assert match, output
    token = match.group(1)

    second = _start(tmp_path, port)
    try:
        _wait_healthy(port, second)
        me = httpx.get(f"http://127.0.0.1:{port}{API}/me", headers={"Authorization": f"Bearer {token}"})
    finally:
        second_output = _stop(second)
    assert me.status_code == 200 and me.json() == {"id": me.json()["id"], "name": "admin", "role": "admin"}
    assert "API token" not in second_output
    assert token not in second_output  # the access log never shows it
