"""The facts of the machine the host check judges: OS, C library, Python, disk, GPUs, system ROCm."""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tunedeck.hostcheck.commands import CommandRunner
from tunedeck.hostcheck.gpus import GpuFact, apple_gpus, discrete_gpus, system_rocm_version


@dataclass(frozen=True)
class HostFacts:
    """What the machine is; plain data, so tests describe any machine."""

    system: str  # platform.system(): "Linux", "Darwin", "Windows"
    machine: str  # "x86_64", "aarch64", "arm64"
    os_name: str  # "Ubuntu 22.04.4 LTS", "macOS 14.5"
    libc: tuple[str, str] | None  # ("glibc", "2.35"); None where unknown (macOS, musl)
    python: tuple[int, int, int]
    python_executable: str
    has_venv: bool  # the venv module with ensurepip, which Debian and Ubuntu ship apart (python3.X-venv)
    free_disk_bytes: int
    disk_path: str
    gpus: list[GpuFact] = field(default_factory=list)
    system_rocm: str | None = None  # the installed ROCm release ("7.1.0"), when ROCm is there

    def gpus_of(self, vendor: str) -> list[GpuFact]:
        """The GPUs of one vendor ("nvidia", "amd", "apple")."""
        return [gpu for gpu in self.gpus if gpu.vendor == vendor]


def gather_host_facts(run: CommandRunner, install_dir: Path) -> HostFacts:
    """Read this machine: `install_dir` is where the virtualenv will be (its nearest existing parent is measured)."""
    system, machine = platform.system(), platform.machine()
    gpus = apple_gpus(run, machine) if system == "Darwin" else discrete_gpus(run)
    measured = _existing_parent(install_dir)
    libc_name, libc_version = platform.libc_ver()
    return HostFacts(
        system=system,
        machine=machine,
        os_name=_os_name(system),
        libc=(libc_name, libc_version) if libc_name and libc_version else None,
        python=(sys.version_info.major, sys.version_info.minor, sys.version_info.micro),
        python_executable=sys.executable,
        has_venv=all(importlib.util.find_spec(name) is not None for name in ("venv", "ensurepip")),
        free_disk_bytes=shutil.disk_usage(measured).free,
        disk_path=str(measured),
        gpus=gpus,
        system_rocm=system_rocm_version(run)[0] if any(gpu.vendor == "amd" for gpu in gpus) else None,
    )


def _os_name(system: str) -> str:
    if system == "Darwin":
        return f"macOS {platform.mac_ver()[0]}".strip()
    if system == "Linux":
        try:
            release = platform.freedesktop_os_release()
        except OSError:
            release = {}
        return release.get("PRETTY_NAME") or f"Linux {platform.release()}"
    return f"{system} {platform.release()}".strip()


def _existing_parent(path: Path) -> Path:
    candidate = path.resolve()
    while not candidate.exists() and candidate != candidate.parent:
        candidate = candidate.parent
    return candidate


def environment_choice(name: str) -> str | None:
    """A choice the user made in the environment (TORCH_VARIANT, TORCH_INDEX_URL), None when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None
