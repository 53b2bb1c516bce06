"""Running the vendors' tools (`nvidia-smi`, `amd-smi`, `rocminfo`, `system_profiler`) without ever raising.

Every probe takes a `CommandRunner`, so tests hand it the outputs of a machine they describe
instead of the machine they run on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

CommandRunner = Callable[[list], str | None]
"""Runs a command (its arguments as a list) and returns what it printed, or None when it is missing or fails."""

COMMAND_TIMEOUT_S = 15.0  # rocminfo and nvidia-smi can take seconds on a machine with many GPUs


def run_tool(command: list) -> str | None:
    """Standard output of `command`, or None when the program is missing, fails or hangs."""
    program = shutil.which(command[0]) or _rocm_tool(command[0])
    if program is None:
        return None
    try:
        done = subprocess.run(
            [program, *command[1:]], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def rocm_root() -> Path:
    """Where ROCm is installed: ROCM_PATH (ROCm's own variable), else /opt/rocm."""
    return Path(os.environ.get("ROCM_PATH") or "/opt/rocm")


def _rocm_tool(name: str) -> str | None:
    # ROCm's tools are often not on PATH: they live in its bin folder.
    candidate = rocm_root() / "bin" / name
    return str(candidate) if candidate.is_file() else None
