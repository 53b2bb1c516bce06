"""env.json: the software and hardware a run used, so its results can be reproduced or explained."""

from __future__ import annotations

import importlib.metadata
import platform
import socket
import sys
from typing import Any

from tunedeck.engine.host.hardware import HardwareProfile

_PACKAGES = (
    "tunedeck",
    "torch",
    "transformers",
    "peft",
    "trl",
    "accelerate",
    "datasets",
    "tokenizers",
    "safetensors",
    "huggingface_hub",
    "bitsandbytes",
    "flash_attn",
    "numpy",
)


def package_versions(names: tuple[str, ...] = _PACKAGES) -> dict[str, str | None]:
    """Installed version of each package, None when absent."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


FINGERPRINT_LABELS: dict[str, str] = {
    "device_type": "device type",
    "device_name": "device",
    "driver": "driver",
    "torch": "torch",
    "cuda": "CUDA",
    "rocm": "ROCm",
    "transformers": "transformers",
}
"""The platform a run's numerics depend on, key by key, with the words a change is reported in."""


def environment_fingerprint(hardware: HardwareProfile) -> dict[str, str | None]:
    """Device type and name, driver, torch, CUDA or ROCm and transformers versions: what the checks ran on.

    A run records it in env.json; resuming on a platform that differs in any of these runs the
    checks before training again (`tunedeck.engine.preflight.platform_change`).
    """
    from tunedeck.engine.host.gpu_telemetry import driver_info

    return {
        "device_type": hardware.backend,
        "device_name": hardware.device_name,
        "driver": driver_info(hardware).get("driver_version"),
        "torch": hardware.torch_version or None,
        "cuda": hardware.cuda_version,
        "rocm": hardware.hip_version,
        "transformers": package_versions(("transformers",))["transformers"],
    }


def capture_environment(hardware: HardwareProfile, processes: int = 1, seed: int | None = None) -> dict[str, Any]:
    """Everything env.json records: packages, Python, host, accelerator, driver, seeds, tunedeck build."""
    import os

    import torch

    from tunedeck.engine.host.gpu_telemetry import driver_info
    from tunedeck.engine.host.host_info import host_details, tunedeck_build

    return {
        "tunedeck": tunedeck_build(),
        "host_details": host_details(),
        "driver": driver_info(hardware),
        "seeds": {"config_seed": seed, "python_hash_seed": os.environ.get("PYTHONHASHSEED")},
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "processes": processes,
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        },
        "hardware": hardware.to_dict(),
        "fingerprint": environment_fingerprint(hardware),
    }
