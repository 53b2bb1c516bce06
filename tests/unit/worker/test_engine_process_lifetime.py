"""An engine process (ingestion, export, inspection, ...) dies with its worker, and stops when its item is cancelled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.waiting import HANG_S, wait_until
from tunedeck.worker import engine_process
from tunedeck.worker.engine_process import EngineStoppedError, run_engine_module

# A worker stand-in: starts an engine module through the json-process entry (as `run_engine_module` does,
# with its own pid), prints the child's pid, then waits to be killed.
_WORKER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    code = ("import pathlib, sys, time; from tunedeck.engine.json_process import run_spec_main; "
            "handler = lambda spec: pathlib.Path(spec['ready']).touch() or time.sleep(300) or {}; "
            "run_spec_main('slow', handler, sys.argv[1:])")
    child = subprocess.Popen([sys.executable, "-c", code, "--spec", sys.argv[1], "--parent-pid", str(os.getpid())])
    print(child.pid, flush=True)
    time.sleep(300)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead: only its exit status is left for the parent that started it.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_killed_worker_takes_its_engine_process_with_it(tmp_path: Path) -> None:
    spec, ready = tmp_path / "spec.json", tmp_path / "ready"
    spec.write_text(json.dumps({"ready": str(ready)}))
    worker = subprocess.Popen([sys.executable, "-c", _WORKER, str(spec)], stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    child = int(worker.stdout.readline())
    wait_until(ready.exists, "the engine process is running its handler")
    assert _alive(child)
    try:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        wait_until(lambda: not _alive(child), "the engine process ended with its worker", timeout_s=HANG_S)
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_process_whose_parent_died_before_it_asked_ends_at_once() -> None:
    code = "from tunedeck.core.parent_death import die_with_parent; die_with_parent(1); print('still running')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 1 and "still running" not in done.stdout


def test_a_cancelled_item_stops_its_engine_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []

    def sleeping(module: str, spec_path: Path) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(300)"]

    real_popen = subprocess.Popen

    def recording_popen(*args: object, **kwargs: object) -> subprocess.Popen[str]:
        process = real_popen(*args, **kwargs)  # type: ignore[call-overload]
        started.append(process.pid)
        return process  # type: ignore[no-any-return]

    monkeypatch.setattr(engine_process, "engine_command", sleeping)
    monkeypatch.setattr(engine_process.subprocess, "Popen", recording_popen)
    asked = []

    def cancelled() -> bool:
        asked.append(True)
        return len(asked) >= 2  # the second look finds the item cancelled

    with pytest.raises(EngineStoppedError, match="cancelled"):
        run_engine_module("ingestion", {}, tmp_path, timeout_s=HANG_S, should_stop=cancelled)
    assert started and not _alive(started[0])


def test_the_engine_command_names_the_worker_as_the_parent(tmp_path: Path) -> None:
    command = engine_process.engine_command("export", tmp_path / "spec.json")
    assert command[command.index("--parent-pid") + 1] == str(os.getpid())
