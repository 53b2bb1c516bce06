"""System readings over a run: host CPU and memory, and the first device's use, memory, temperature and power.

A `SystemSampler` reads them on a background thread every `interval_s` seconds while training
runs, out of the training loop, and hands each sample to `emit` (the run writes it as a
`system` event). A run records at most `max_samples`: after every eighth of them the
interval doubles, so a long run is covered end to end at a coarser grain (15 s at first,
then 30 s, ... up to 32 minutes: about four days with the defaults).
Readings a machine cannot give (no GPU, no telemetry library) are left out of the sample.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tunedeck.engine.host.gpu_telemetry import TelemetrySource

DEFAULT_INTERVAL_S = 15.0
MAX_SAMPLES = 800
DOUBLINGS = 8  # the interval doubles after each eighth of the samples
_MB = 2**20


class HostReader:
    """The host's CPU use (percent of all cores since the previous reading) and memory in use."""

    def __init__(self) -> None:
        import psutil

        self._psutil = psutil
        self._process = psutil.Process()
        self._counting = False

    def read(self) -> dict[str, float]:
        """`cpu_percent`, `memory_used_mb`, `memory_total_mb` and this process's `process_memory_mb`.

        The CPU use is over the time since the previous reading; the first reading measures it
        over a tenth of a second instead (there is no previous one).
        """
        cpu = self._psutil.cpu_percent(interval=None if self._counting else 0.1)
        self._counting = True
        memory = self._psutil.virtual_memory()
        return {
            "cpu_percent": float(cpu),
            "memory_used_mb": round((memory.total - memory.available) / _MB, 1),
            "memory_total_mb": round(memory.total / _MB, 1),
            "process_memory_mb": round(self._process.memory_info().rss / _MB, 1),
        }


def device_reading(source: TelemetrySource) -> dict[str, float]:
    """The first device's use, memory, temperature and power now; empty where nothing can be read."""
    sample = source.sample()
    if sample is None:
        return {}
    values = {
        "device_utilization_pct": sample.utilization_pct,
        "device_memory_used_mb": sample.memory_used_mb,
        "device_temperature_c": sample.temperature_c,
        "device_power_w": sample.power_w,
    }
    return {name: round(float(value), 1) for name, value in values.items() if value is not None}


class SystemSampler:
    """Samples the host and `device` every `interval_s` seconds on a daemon thread, from `start` to `stop`."""

    def __init__(
        self,
        device: TelemetrySource,
        emit: Callable[[dict[str, Any]], object],
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        max_samples: int = MAX_SAMPLES,
    ) -> None:
        self.device = device
        self.emit = emit
        self.interval_s = interval_s
        self.max_samples = max(1, max_samples)
        self.count = 0
        self._host = HostReader()
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Take a first sample and keep sampling until `stop`."""
        self._started = time.monotonic()
        self.take()
        self._thread = threading.Thread(target=self._loop, name="system-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and take a last sample (the run's end is always in the series)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.take()
        self.device.close()

    def current_interval(self) -> float:
        """The wait before the next sample: `interval_s`, doubled after each eighth of `max_samples`."""
        block = max(1, self.max_samples // DOUBLINGS)
        return self.interval_s * 2 ** (self.count // block)

    def _loop(self) -> None:
        while not self._stop.wait(self.current_interval()):
            self.take()

    def take(self) -> None:
        """Take one sample now and hand it to `emit`, unless the run already has `max_samples`."""
        if self.count >= self.max_samples:
            return
        try:
            reading = {**self._host.read(), **device_reading(self.device)}
        except Exception:  # a reading that fails once must not end the run: the next one may work
            return
        if reading:
            self.count += 1
            self.emit({"elapsed_s": round(time.monotonic() - self._started, 1), **reading})
