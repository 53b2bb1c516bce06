"""The host a run used and the tunedeck build it ran: CPU, memory, OS, version and source commit.

These complete env.json and `tunedeck env` (the checks before training: note the hardware, driver and
environment details). The commit is read from the checkout's `.git` files, without
running any program, and is None for an installed package.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what the platform reports."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def host_details() -> dict[str, Any]:
    """CPU model and cores, total and available memory, operating system."""
    import psutil

    memory = psutil.virtual_memory()
    return {
        "cpu": cpu_model(),
        "cpu_cores_logical": os.cpu_count(),
        "cpu_cores_physical": psutil.cpu_count(logical=False),
        "memory_total_bytes": int(memory.total),
        "memory_available_bytes": int(memory.available),
        "os": platform.platform(),
        "machine": platform.machine(),
    }


def source_commit(start: Path | None = None) -> str | None:
    """The commit checked out in the repository holding this package, or None outside a checkout."""
    here = (start or Path(__file__)).resolve()
    for folder in (here, *here.parents):
        git = folder / ".git"
        if git.is_file():  # a worktree: ".git" names the real git folder
            text = git.read_text(encoding="utf-8").strip()
            if text.startswith("gitdir:"):
                git = (folder / text.split(":", 1)[1].strip()).resolve()
        if git.is_dir():
            return _read_head(git)
    return None


def tunedeck_build() -> dict[str, Any]:
    """tunedeck's installed version and source commit."""
    try:
        version: str | None = importlib.metadata.version("tunedeck")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"version": version, "commit": source_commit()}


def _read_head(git: Path) -> str | None:
    head_file = git / "HEAD"
    if not head_file.is_file():
        return None
    head = head_file.read_text(encoding="utf-8").strip()
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    common = git
    commondir = git / "commondir"
    if commondir.is_file():  # worktrees keep their refs in the main git folder
        common = (git / commondir.read_text(encoding="utf-8").strip()).resolve()
    for base in (git, common):
        ref_file = base / ref
        if ref_file.is_file():
            return ref_file.read_text(encoding="utf-8").strip() or None
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref:
                return parts[0]
    return None
