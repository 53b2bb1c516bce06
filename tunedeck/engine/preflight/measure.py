"""Memory peaks of one piece of work: on the accelerator (CUDA/ROCm, MPS) and on the host (resident set).

Linux lets a process reset its resident-set high-water mark (`/proc/self/clear_refs`), so
the host peak of one step is exact there; elsewhere a sampling thread approximates it.
"""

from __future__ import annotations

import ctypes
import gc
import re
import sys
import threading
from pathlib import Path
from typing import Protocol

from tunedeck.engine.host.hardware import HardwareProfile

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


class MemoryProbe(Protocol):
    """Measures the peak memory of the work between `reset` and `peak_bytes`."""

    kind: str

    def reset(self) -> None:
        """Start a new measurement."""
        ...

    def peak_bytes(self) -> int | None:
        """The peak since `reset`, or None when it cannot be measured."""
        ...


class CudaProbe:
    """Peak bytes allocated by torch on the current CUDA or ROCm device (reserved bytes are kept too)."""

    kind = "accelerator"

    def __init__(self) -> None:
        self.reserved: int | None = None

    def reset(self) -> None:
        """Reset torch's peak statistics."""
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def peak_bytes(self) -> int | None:
        """Peak allocated since `reset`."""
        import torch

        torch.cuda.synchronize()
        self.reserved = int(torch.cuda.max_memory_reserved())
        return int(torch.cuda.max_memory_allocated())


class MpsProbe:
    """Apple GPUs expose no peak: memory held by the Metal driver after the work is the closest figure."""

    kind = "accelerator"

    def reset(self) -> None:
        """Nothing to reset on MPS."""

    def peak_bytes(self) -> int | None:
        """Driver-allocated bytes now."""
        import torch

        return int(torch.mps.driver_allocated_memory())


class HostRssProbe:
    """Peak resident set of this process: exact on Linux, sampled every 10 ms elsewhere."""

    kind = "host"

    def __init__(self) -> None:
        self._exact = _CLEAR_REFS.exists() and _STATUS.exists()
        self._peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        """Reset the high-water mark (or start sampling)."""
        gc.collect()
        _release_free_heap()
        if self._exact:
            try:
                _CLEAR_REFS.write_text("5", encoding="ascii")
                return
            except OSError:  # a hardened kernel may refuse; fall back to sampling
                self._exact = False
        self._stop_sampling()
        self._peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="rss-sampler", daemon=True)
        self._thread.start()

    def peak_bytes(self) -> int | None:
        """Peak resident bytes since `reset`."""
        if self._exact:
            match = re.search(r"VmHWM:\s+(\d+)\s+kB", _STATUS.read_text(encoding="ascii"))
            return int(match.group(1)) * 1024 if match else None
        self._stop_sampling()
        return max(self._peak, _rss())

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self._peak = max(self._peak, _rss())

    def _stop_sampling(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None


def accelerator_probe(hardware: HardwareProfile) -> MemoryProbe | None:
    """The accelerator's probe, or None on a CPU-only machine."""
    if hardware.backend in ("cuda", "rocm"):
        return CudaProbe()
    if hardware.backend == "mps":
        return MpsProbe()
    return None


def free_accelerator_memory() -> None:
    """Return cached blocks so the next measurement starts from what is really held."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    mps = getattr(torch, "mps", None)
    if mps is not None and getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        mps.empty_cache()


def _release_free_heap() -> None:
    """Give freed heap pages back to the OS (glibc), so the next step's allocations show in RSS.

    Without it, a process that already freed a lot (a long-lived server, a test run)
    serves the step from retained pages and the measured peak stops growing with the
    micro-batch, which would flatten the memory-fit line.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # another C library: sampling still works, less precisely
        return


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)
