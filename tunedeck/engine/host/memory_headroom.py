"""The memory a training step leaves unused on its device: what an optional saving may spend instead.

The best figure is the preflight's: its full-step check measured the step's peak and the
memory fit projected it at the micro-batch the run uses, against the usable memory (the cap
less the fit's safety margin), so their difference is the step's real headroom. Without a
preflight the figure is the free memory read now, before the first step: on CUDA or ROCm the
driver's free bytes of the run's device, elsewhere the host's available memory. A simulated
memory cap (`TUNEDECK_MEMORY_CAP`) bounds either, as it bounds the memory fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunedeck.engine.host.hardware import HardwareProfile


def step_headroom(
    hardware: HardwareProfile, memory_fit: Mapping[str, Any] | None, memory_cap_bytes: int | None = None
) -> tuple[int | None, str]:
    """(headroom in bytes, its source: "preflight", "accelerator" or "host"); (None, ...) when unreadable.

    `memory_fit` is the preflight report's decision (`MemoryFitDecision.to_dict()`), used when
    it fits; `memory_cap_bytes` the simulated cap, if any.
    """
    if memory_fit and memory_fit.get("fits"):
        usable, peak = memory_fit.get("usable_bytes"), memory_fit.get("projected_peak_bytes")
        if isinstance(usable, (int, float)) and isinstance(peak, (int, float)):
            return max(0, int(usable - peak)), "preflight"
    if hardware.backend in ("cuda", "rocm"):
        return _accelerator_free(memory_cap_bytes), "accelerator"
    return _host_available(memory_cap_bytes), "host"


def _accelerator_free(memory_cap_bytes: int | None) -> int | None:
    """Free bytes on the current CUDA/ROCm device, within the cap when one is set."""
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    if memory_cap_bytes is not None:
        free = min(free, memory_cap_bytes - (total - free))
    return max(0, int(free))


def _host_available(memory_cap_bytes: int | None) -> int:
    """Available host memory, within the cap (less this process's resident set) when one is set."""
    import psutil

    available = int(psutil.virtual_memory().available)
    if memory_cap_bytes is not None:
        available = min(available, memory_cap_bytes - int(psutil.Process().memory_info().rss))
    return max(0, available)
