"""What installing tunedeck asks of the machine: the pinned torch, its build's needs, the Python, the disk.

The torch version is read from `requirements.lock` and the Python range from `pyproject.toml`,
so the host check never states a second copy of either; the build's needs and the disk each
variant takes are in `install_needs.json` beside this module.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from tunedeck.hostcheck.locks import MAIN_LOCK, lock_pins


@dataclass(frozen=True)
class TorchBuildNeeds:
    """What the pinned torch's builds need: the registry's CUDA build, glibc, and the extra wheel indexes."""

    version: str
    registry_cuda: str
    cuda_min_driver_linux: str
    cuda_min_compute_capability: str
    glibc_min: str
    rocm_index: str  # with "{rocm}" for the ROCm release, e.g. "7.1"
    cpu_index: str

    @property
    def release(self) -> str:
        """ "2.13" of "2.13.0": the release the ROCm table is keyed by."""
        return ".".join(self.version.split(".")[:2])


def torch_needs(repo: Path) -> TorchBuildNeeds:
    """The needs of the torch `requirements.lock` pins; a ValueError names what the table lacks."""
    version = lock_pins(repo / MAIN_LOCK).get("torch")
    if version is None:
        raise ValueError(f"{MAIN_LOCK} pins no torch version")
    entry = _table()["torch"].get(version)
    if entry is None:
        raise ValueError(f"tunedeck/hostcheck/install_needs.json has no entry for torch {version}")
    return TorchBuildNeeds(version=version, **entry)


def disk_needed_gb(variant: str) -> int:
    """Free disk (GB) the install of `variant` needs for its virtualenv and pip's download cache."""
    return int(_table()["disk_gb"][variant])


def python_range(repo: Path) -> tuple[tuple[int, int], tuple[int, int]]:
    """(lowest, first excluded) minor versions of `requires-python` in pyproject.toml, e.g. ((3, 11), (3, 12))."""
    text = (repo / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r'requires-python\s*=\s*">=(\d+)\.(\d+)\s*,\s*<(\d+)\.(\d+)"', text)
    if found is None:
        raise ValueError('pyproject.toml states no requires-python of the form ">=X.Y,<X.Z"')
    low_major, low_minor, high_major, high_minor = (int(part) for part in found.groups())
    return (low_major, low_minor), (high_major, high_minor)


def _table() -> dict[str, Any]:
    return json.loads(files("tunedeck.hostcheck").joinpath("install_needs.json").read_text(encoding="utf-8"))
