"""Running the engine child as the worker does: one process, or several under torchrun (gloo on the CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.waiting import HANG_S
from tunedeck.core.torchrun import torchrun_launcher
from tunedeck.engine.training.run_spec import RunSpec


def launch(spec: RunSpec, processes: int, folder: Path, *, env: dict[str, str] | None = None) -> int:
    """Run `spec` on `processes` processes; the run's exit status (rank 0's outcome under torchrun)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec_path, outcome = folder / "spec.json", folder / "outcome.json"
    spec_path.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
    child = ["-m", "tunedeck.engine.child", "--spec", str(spec_path), "--outcome", str(outcome)]
    command = [*torchrun_launcher(processes), *child] if processes > 1 else [sys.executable, *child]
    run_env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    done = subprocess.run(command, env=run_env, capture_output=True, text=True, timeout=HANG_S * 4)
    (folder / "output.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if not outcome.is_file():
        return done.returncode or 1
    return int(json.loads(outcome.read_text(encoding="utf-8"))["exit"])
