"""`tunedeck worker --ray-address` and the Ray driver refuse an unusable cluster with one clear line.

Without Ray installed (simulated by a `ray` package that fails to import, first on the path)
both say how to install it; with Ray, an address nobody answers at is named, within seconds,
and the worker opens no database before refusing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.live_server import free_port
from tests.fixtures.ray_cluster import REPO_ROOT
from tunedeck.cli.main import app

DRIVER_TIMEOUT_S = 120


@pytest.fixture
def without_ray(tmp_path: Path) -> Path:
    """A folder whose `ray` package fails to import, to put first on PYTHONPATH."""
    package = tmp_path / "hidden" / "ray"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise ImportError("No module named \'ray\' (hidden by the test)")\n')
    return package.parent


def _python_path(*first: Path) -> str:
    return os.pathsep.join(filter(None, [*map(str, first), str(REPO_ROOT), os.environ.get("PYTHONPATH")]))


def _worker(tmp_path: Path, address: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["worker", "--ray-address", address])
    return result.exit_code, result.output


def test_worker_with_an_address_nobody_answers_at_stops_with_the_reason(
    ray_installed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", _python_path())
    address = f"127.0.0.1:{free_port()}"
    code, output = _worker(tmp_path, address)
    assert code == 1, output
    assert f"no Ray cluster answers at {address}" in output and "Traceback" not in output
    assert not (tmp_path / "tunedeck.db").exists()  # refused before opening anything


def test_worker_without_ray_says_how_to_install_it(
    without_ray: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", _python_path(without_ray))
    code, output = _worker(tmp_path, "127.0.0.1:6379")
    assert code == 1, output
    assert "make install-ray" in output and "Traceback" not in output


def _driver(tmp_path: Path, address: str, *python_path: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    spec, outcome = tmp_path / "attempt-1" / "spec.json", tmp_path / "attempt-1" / "outcome.json"
    spec.parent.mkdir()
    spec.write_text(json.dumps({"out": str(spec.parent / "run"), "model": "m", "train": "t"}))
    command = [sys.executable, "-m", "tunedeck.engine.ray_launch", "--spec", str(spec), "--outcome", str(outcome)]
    command += ["--address", address, "--workers", "2"]
    env = {**os.environ, "PYTHONPATH": _python_path(*python_path)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
    return done, json.loads(outcome.read_text())


def test_driver_without_ray_gives_the_job_back_and_says_how_to_install_it(without_ray: Path, tmp_path: Path) -> None:
    done, outcome = _driver(tmp_path, "127.0.0.1:6379", without_ray)
    assert done.returncode == outcome["exit"] == 5  # back to the queue: not the job's fault
    assert "make install-ray" in done.stderr and "make install-ray" in outcome["error"]
    assert "Traceback" not in done.stderr


def test_driver_with_an_address_nobody_answers_at_gives_the_job_back(ray_installed: None, tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    done, outcome = _driver(tmp_path, address)
    assert done.returncode == outcome["exit"] == 5
    assert f"no Ray cluster answers at {address}" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "attempt-1" / "run").exists()
