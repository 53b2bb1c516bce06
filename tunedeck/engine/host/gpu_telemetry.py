"""GPU telemetry: temperature, clocks, power and throttling, read through NVML (NVIDIA) or amdsmi (AMD).

Both libraries are optional and imported only when asked for: a machine without them, or
without a driver, gets `NullTelemetry`, whose samples are empty, and every report says
"not available" instead of failing. A sustained-throughput measurement runs a
`TelemetrySampler` beside training and summarises what it saw with `summarize_samples`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from tunedeck.engine.host.hardware import HardwareProfile

# NVML clock-event ("throttle") reason bits that mean the GPU slowed itself down; idle,
# application-clock and display settings are not slowdowns caused by the workload.
_NVML_SLOWDOWNS = {
    0x4: "power_cap",
    0x8: "hw_slowdown",
    0x20: "thermal_software",
    0x40: "thermal_hardware",
    0x80: "power_brake",
}


@dataclass(frozen=True)
class GpuSample:
    """One reading of the first GPU; None where the library cannot say."""

    time_s: float
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    utilization_pct: float | None = None
    throttle_reasons: tuple[str, ...] = ()
    memory_used_mb: float | None = None


class TelemetrySource(Protocol):
    """Somewhere to read GPU samples from."""

    name: str

    def sample(self) -> GpuSample | None:
        """One reading now, or None when nothing can be read."""
        ...

    def close(self) -> None:
        """Release the library handle."""
        ...


class NullTelemetry:
    """No telemetry library or no GPU: every sample is None."""

    name = "none"

    def __init__(self, reason: str = "no GPU telemetry library") -> None:
        self.reason = reason

    def sample(self) -> GpuSample | None:
        """Nothing to read."""
        return None

    def close(self) -> None:
        """Nothing to release."""


class NvmlTelemetry:
    """NVIDIA GPUs through NVML (the `nvidia-ml-py` package)."""

    name = "nvml"

    def __init__(self, device_index: int = 0) -> None:
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)

    def sample(self) -> GpuSample | None:
        """Temperature, SM clock, power and the active slowdown reasons."""
        nvml, handle = self._nvml, self._handle
        reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        bits = _read(lambda: int(reasons_fn(handle))) if reasons_fn is not None else None
        return GpuSample(
            time_s=time.monotonic(),
            temperature_c=_read(lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))),
            sm_clock_mhz=_read(lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))),
            max_sm_clock_mhz=_read(lambda: float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))),
            power_w=_read(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
            power_limit_w=_read(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0),
            utilization_pct=_read(lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)),
            throttle_reasons=tuple(name for bit, name in _NVML_SLOWDOWNS.items() if bits and bits & bit),
            memory_used_mb=_read(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20),
        )

    def close(self) -> None:
        """Shut NVML down."""
        _read(self._nvml.nvmlShutdown)


class AmdSmiTelemetry:
    """AMD GPUs through the `amdsmi` library that ships with ROCm."""

    name = "amdsmi"

    def __init__(self, device_index: int = 0) -> None:
        import amdsmi

        self._smi = amdsmi
        amdsmi.amdsmi_init()
        self._handle = amdsmi.amdsmi_get_processor_handles()[device_index]

    def sample(self) -> GpuSample | None:
        """Edge temperature, GFX clock, socket power and the throttle status of the GPU metrics table."""
        smi, handle = self._smi, self._handle
        clock = _read(lambda: smi.amdsmi_get_clock_info(handle, smi.AmdSmiClkType.GFX)) or {}
        power = _read(lambda: smi.amdsmi_get_power_info(handle)) or {}
        metrics = _read(lambda: smi.amdsmi_get_gpu_metrics_info(handle)) or {}
        throttle = metrics.get("throttle_status") if isinstance(metrics, dict) else None
        watts = power.get("current_socket_power") or power.get("average_socket_power")
        return GpuSample(
            time_s=time.monotonic(),
            temperature_c=_read(
                lambda: float(
                    smi.amdsmi_get_temp_metric(
                        handle, smi.AmdSmiTemperatureType.EDGE, smi.AmdSmiTemperatureMetric.CURRENT
                    )
                )
            ),
            sm_clock_mhz=_number(clock.get("clk")),
            max_sm_clock_mhz=_number(clock.get("max_clk")),
            power_w=_number(watts),
            power_limit_w=_number(power.get("power_limit")),
            utilization_pct=_read(lambda: float(smi.amdsmi_get_gpu_activity(handle)["gfx_activity"])),
            throttle_reasons=("throttled",) if isinstance(throttle, int) and throttle not in (0, 0xFFFFFFFF) else (),
            memory_used_mb=_number((_read(lambda: smi.amdsmi_get_gpu_vram_usage(handle)) or {}).get("vram_used")),
        )

    def close(self) -> None:
        """Shut amdsmi down."""
        _read(self._smi.amdsmi_shut_down)


def open_telemetry(hardware: HardwareProfile, device_index: int = 0) -> TelemetrySource:
    """The telemetry source for `hardware`: NVML on CUDA, amdsmi on ROCm, otherwise `NullTelemetry`."""
    try:
        if hardware.backend == "cuda":
            return NvmlTelemetry(device_index)
        if hardware.backend == "rocm":
            return AmdSmiTelemetry(device_index)
    except Exception as error:  # missing package, missing driver, no permission: all mean "no telemetry"
        return NullTelemetry(f"{type(error).__name__}: {error}")
    return NullTelemetry(f"no GPU telemetry on {hardware.backend}")


def driver_info(hardware: HardwareProfile) -> dict[str, Any]:
    """The GPU driver's version (and the newest CUDA it supports on NVIDIA), None where unknown."""
    info: dict[str, Any] = {"driver_version": None, "driver_cuda_version": None}
    try:
        if hardware.backend == "cuda":
            import pynvml

            pynvml.nvmlInit()
            try:
                version = pynvml.nvmlSystemGetDriverVersion()
                info["driver_version"] = version.decode() if isinstance(version, bytes) else str(version)
                cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
                info["driver_cuda_version"] = f"{cuda // 1000}.{(cuda % 1000) // 10}"
            finally:
                pynvml.nvmlShutdown()
        elif hardware.backend == "rocm":
            import amdsmi

            amdsmi.amdsmi_init()
            try:
                handle = amdsmi.amdsmi_get_processor_handles()[0]
                info["driver_version"] = str(amdsmi.amdsmi_get_gpu_driver_info(handle).get("driver_version"))
            finally:
                amdsmi.amdsmi_shut_down()
    except Exception as error:  # no library or no driver: the versions stay unknown
        info["unavailable"] = f"{type(error).__name__}: {error}"
    return info


@dataclass
class TelemetrySampler:
    """Samples `source` every `interval_s` seconds on a background thread while training runs."""

    source: TelemetrySource
    interval_s: float = 0.5
    samples: list[GpuSample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Take a first sample and keep sampling until `stop`."""
        self._take()
        self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> list[GpuSample]:
        """Stop sampling, take a last sample, and return all of them."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._take()
        return list(self.samples)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def _take(self) -> None:
        sample = self.source.sample()
        if sample is not None:
            self.samples.append(sample)


def summarize_samples(samples: list[GpuSample], source: str) -> dict[str, Any]:
    """Figures over a measurement: temperatures, clocks, power, and whether the GPU throttled.

    Throttling is reported when the driver named a slowdown reason in any sample, or when the
    clock under load fell below 90% of its maximum (a sign of thermal or power limits that
    some drivers do not flag).
    """
    if not samples:
        return {"source": source, "samples": 0, "available": False, "throttled": None}

    def values(name: str) -> list[float]:
        return [float(v) for v in (getattr(s, name) for s in samples) if v is not None]

    temps, power = values("temperature_c"), values("power_w")
    # An idle GPU lowers its clock on purpose: only samples under load say anything about throttling.
    busy = [s for s in samples if s.utilization_pct is None or s.utilization_pct >= 50]
    clocks = [float(s.sm_clock_mhz) for s in busy if s.sm_clock_mhz is not None]
    max_clock = max(values("max_sm_clock_mhz"), default=None)
    reasons: dict[str, int] = {}
    for sample in samples:
        for reason in sample.throttle_reasons:
            reasons[reason] = reasons.get(reason, 0) + 1
    clock_ratio = (min(clocks) / max_clock) if clocks and max_clock else None
    return {
        "source": source,
        "samples": len(samples),
        "available": True,
        "temperature_c": _spread(temps),
        "sm_clock_mhz": _spread(clocks),
        "max_sm_clock_mhz": max_clock,
        "lowest_clock_share_of_max": round(clock_ratio, 3) if clock_ratio is not None else None,
        "power_w": _spread(power),
        "power_limit_w": max(values("power_limit_w"), default=None),
        "throttle_reasons": reasons,
        "throttled": bool(reasons) or (clock_ratio is not None and clock_ratio < 0.9),
        "first": asdict(samples[0]),
        "last": asdict(samples[-1]),
    }


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": round(min(values), 1), "mean": round(sum(values) / len(values), 1), "max": round(max(values), 1)}


def _read(getter: Any) -> Any:
    """One library call; a reading the device does not support becomes None instead of an error."""
    try:
        return getter()
    except Exception:  # each vendor raises its own error types for unsupported queries
        return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
