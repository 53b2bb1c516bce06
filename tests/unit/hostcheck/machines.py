"""Machines described by what their tools print: `nvidia-smi`, `amd-smi`, `rocminfo`, `system_profiler`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tunedeck.hostcheck.assess import Wanted
from tunedeck.hostcheck.commands import CommandRunner
from tunedeck.hostcheck.gpus import apple_gpus, discrete_gpus
from tunedeck.hostcheck.host import HostFacts
from tunedeck.hostcheck.install_needs import python_range, torch_needs

REPO = Path(__file__).resolve().parents[3]
GB = 10**9

NVIDIA_QUERY = "--query-gpu=index,name,memory.total,driver_version,compute_cap"


def nvidia_smi(driver: str, cuda: str, capability: str = "9.0", model: str = "NVIDIA H100 80GB HBM3") -> dict:
    """`nvidia-smi`'s outputs on a machine with two GPUs of `model` under `driver`."""
    banner = (
        f"| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda}     |\n"
        "|-------------------------------+----------------------+----------------------+\n"
    )
    rows = "".join(f"{index}, {model}, 81559, {driver}, {capability}\n" for index in range(2))
    return {("nvidia-smi", NVIDIA_QUERY): rows, ("nvidia-smi",): banner}


def amd_smi(gfx: str, model: str = "AMD Instinct MI300X") -> dict:
    """`amd-smi static --asic --vram --driver --json` on a machine with one GPU (the ROCm 6.x list shape)."""
    gpu = {
        "gpu": 0,
        "asic": {"market_name": model, "target_graphics_version": gfx},
        "vram": {"size": {"value": 196592, "unit": "MB"}},
        "driver": {"name": "amdgpu", "version": "6.10.5"},
    }
    document = json.dumps([gpu])
    return {("amd-smi", "static", "--asic", "--vram", "--driver", "--json"): document}


def runner(outputs: dict) -> CommandRunner:
    """A runner answering each known command with its output, and None (missing tool) otherwise."""

    def run(command: list) -> str | None:
        for key, output in outputs.items():
            if tuple(command) == key or (len(key) > 1 and tuple(command[: len(key)]) == key):
                return output
        return None

    return run


def linux(outputs: dict | None = None, **changes: object) -> HostFacts:
    """A Linux x86_64 machine with Python 3.11, 100 GB free, and the GPUs its tools list."""
    facts = HostFacts(
        system="Linux",
        machine="x86_64",
        os_name="Ubuntu 22.04.4 LTS",
        libc=("glibc", "2.35"),
        python=(3, 11, 9),
        python_executable="/usr/bin/python3.11",
        has_venv=True,
        free_disk_bytes=100 * GB,
        disk_path="/home/renter/tunedeck",
        gpus=discrete_gpus(runner(outputs or {})),
    )
    return replace(facts, **changes)  # type: ignore[arg-type]


def mac(chip: str = "Apple M2 Pro", memory_gib: int = 32) -> HostFacts:
    """macOS on Apple silicon, its GPU read from `system_profiler` and `sysctl`."""
    outputs = {
        (
            "system_profiler",
            "SPDisplaysDataType",
            "-json",
        ): json.dumps({"SPDisplaysDataType": [{"sppci_model": chip, "sppci_cores": "19"}]}),
        ("sysctl", "-n", "hw.memsize"): f"{memory_gib * 2**30}\n",
    }
    return HostFacts(
        system="Darwin",
        machine="arm64",
        os_name="macOS 14.5",
        libc=None,
        python=(3, 11, 9),
        python_executable="/opt/homebrew/bin/python3.11",
        has_venv=True,
        free_disk_bytes=200 * GB,
        disk_path="/Users/me/tunedeck",
        gpus=apple_gpus(runner(outputs), "arm64"),
    )


def wanted(variant: str | None = None, index_url: str | None = None) -> Wanted:
    """What this repository pins (torch from requirements.lock, Python from pyproject.toml)."""
    return Wanted(torch_needs(REPO), python_range(REPO), variant, index_url)
