"""Running the engine child as the worker does: one process, or several under torchrun (gloo on the CPU)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.waiting import HANG_S
from tunedeck.core.launcher import engine_command
from tunedeck.engine.training.run_spec import RunSpec


def launch(spec: RunSpec, processes: int, folder: Path, *, env: dict[str, str] | None = None) -> int:
    """Run `spec` on `processes` processes; the run's exit status (rank 0's outcome under torchrun)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec_path, outcome = folder / "spec.json", folder / "outcome.json"
    spec_path.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
    command = engine_command(spec_path, processes, outcome)
    run_env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    # A session of its own: on a hang the whole process tree is dumped, then killed, and nothing else.
    with subprocess.Popen(
        command, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=HANG_S * 4)
        except subprocess.TimeoutExpired:
            stacks = stack_dumps(process.pid)
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            (folder / "output.log").write_text(stdout + stderr + stacks, encoding="utf-8")
            raise AssertionError(f"the launch did not end within {HANG_S * 4} s; stacks:\n{stacks}") from None
    (folder / "output.log").write_text(stdout + stderr, encoding="utf-8")
    if not outcome.is_file():
        return process.returncode or 1
    return int(json.loads(outcome.read_text(encoding="utf-8"))["exit"])


def stack_dumps(root: int) -> str:
    """The Python stacks of `root` and every process under it (py-spy, when installed), for a hang's report."""
    import psutil

    spy = Path(sys.executable).with_name("py-spy")
    if not spy.is_file():
        return "(py-spy is not installed: no stacks)"
    dumps = []
    for pid in [root, *(child.pid for child in psutil.Process(root).children(recursive=True))]:
        dumped = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60)
        dumps.append(f"--- process {pid}\n{dumped.stdout}{dumped.stderr}")
    return "\n".join(dumps)
