"""`tunedeck serve`: refuses to listen beyond loopback, bootstraps an admin once, serves the API."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import httpx
from typer.testing import CliRunner

from tests.fixtures.app import API
from tests.fixtures.live_server import free_port, server_env, start_server
from tunedeck.cli.main import app


def test_non_loopback_host_is_refused(tmp_path: Path) -> None:
    runner = CliRunner()
    env = server_env(tmp_path / "data")
    refused = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--workers", "0"], env=env)
    assert refused.exit_code == 1
    assert "--allow-remote" in refused.output
    first_start = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--allow-remote", "--workers", "0"], env=env)
    assert first_start.exit_code == 1
    assert "first start" in first_start.output
    assert "tdk_" not in refused.output + first_start.output  # no admin was bootstrapped


def test_first_start_prints_an_admin_token_once_and_serves(tmp_path: Path) -> None:
    env = server_env(tmp_path / "data")
    port = free_port()
    first = start_server(["serve", "--workers", "0"], env, port)
    try:
        first.wait_healthy()
        me_unauthenticated = httpx.get(f"{first.url}{API}/me", timeout=30)
    finally:
        output = first.stop()
    assert me_unauthenticated.status_code == 401
    match = re.search(r"API token \(shown once, keep it\): (tdk_\S+)", output)
    assert match, output
    token = match.group(1)

    second = start_server(["serve", "--workers", "0"], env, port)
    try:
        second.wait_healthy()
        me = httpx.get(f"{second.url}{API}/me", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    finally:
        second_output = second.stop()
    assert me.status_code == 200 and me.json() == {"id": me.json()["id"], "name": "admin", "role": "admin"}
    assert "API token" not in second_output
    assert token not in second_output  # the access log never shows it


def test_everything_the_server_writes_is_private_whatever_the_umask(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)  # left by an older version, or made by hand
    server = start_server(["serve", "--workers", "1"], server_env(data), umask=0o022)
    try:
        token = server.wait_for_line(r"API token \(shown once, keep it\): (tdk_\S+)").group(1)
        server.wait_healthy()
        rows = "".join(json.dumps({"prompt": f"q{i}", "completion": f"a{i}"}) + "\n" for i in range(4))
        uploaded = httpx.post(
            f"{server.url}{API}/datasets?wait=60", headers={"Authorization": f"Bearer {token}"},
            files={"file": ("train.jsonl", rows.encode())}, data={"name": "private"}, timeout=90,
        )
        # Ingested by the embedded worker: what it writes (scratch, stored files) is private too.
        assert uploaded.status_code == 200, uploaded.text
    finally:
        server.stop()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE((data / "tunedeck.db").stat().st_mode) == 0o600
    written = [path for path in data.rglob("*")]
    assert len(written) > 5  # the database, the session key, the dataset's stored files
    loose = {str(path.relative_to(data)): oct(stat.S_IMODE(path.stat().st_mode)) for path in written
             if stat.S_IMODE(path.stat().st_mode) & 0o077}  # fmt: skip
    assert loose == {}
