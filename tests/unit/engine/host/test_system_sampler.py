"""System samples: host readings always, device readings where a device answers, a bounded count, events whole."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until
from tunedeck.core.errors import ConfigError
from tunedeck.core.events import EventType, EventWriter, read_events
from tunedeck.engine.host.gpu_telemetry import GpuSample, NullTelemetry
from tunedeck.engine.host.system_sampler import SystemSampler, device_reading
from tunedeck.engine.training.run_spec import RunSpec


class FakeDevice:
    """A device that reads use and memory but no temperature or power."""

    name = "fake"

    def __init__(self) -> None:
        self.closed = False

    def sample(self) -> GpuSample:
        return GpuSample(time_s=0.0, utilization_pct=87.0, memory_used_mb=2048.0)

    def close(self) -> None:
        self.closed = True


def test_a_cpu_machine_records_host_readings_only() -> None:
    samples: list[dict[str, Any]] = []
    sampler = SystemSampler(NullTelemetry(), samples.append, interval_s=0.05)
    sampler.start()
    wait_until(lambda: len(samples) >= 3, "three samples", timeout_s=30)
    sampler.stop()
    for sample in samples:
        assert 0.0 <= sample["cpu_percent"] <= 100.0 * 1024
        assert 0 < sample["memory_used_mb"] <= sample["memory_total_mb"]
        assert sample["process_memory_mb"] > 0
        assert not [key for key in sample if key.startswith("device_")]
    assert [s["elapsed_s"] for s in samples] == sorted(s["elapsed_s"] for s in samples)


def test_device_readings_it_cannot_take_are_left_out() -> None:
    device = FakeDevice()
    assert device_reading(device) == {"device_utilization_pct": 87.0, "device_memory_used_mb": 2048.0}
    assert device_reading(NullTelemetry()) == {}
    samples: list[dict[str, Any]] = []
    sampler = SystemSampler(device, samples.append, interval_s=60)
    sampler.start()
    sampler.stop()  # a first and a last sample, however short the run
    assert len(samples) == 2 and samples[0]["device_utilization_pct"] == 87.0
    assert "device_power_w" not in samples[0] and device.closed


def test_the_interval_doubles_and_the_count_is_bounded() -> None:
    samples: list[dict[str, Any]] = []
    sampler = SystemSampler(NullTelemetry(), samples.append, interval_s=10, max_samples=16)
    assert sampler.current_interval() == 10
    for _ in range(40):
        sampler.take()  # by hand, without the clock
    assert len(samples) == 16 == sampler.count
    sampler.count = 2
    assert sampler.current_interval() == 20  # after each eighth of the samples
    sampler.count = 15
    assert sampler.current_interval() == 10 * 2**7


def test_events_from_two_threads_are_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as events:

        def write(kind: EventType, count: int) -> None:
            for i in range(count):
                events.emit(kind, message="x" * 2000, i=i)

        threads = [threading.Thread(target=write, args=(kind, 300)) for kind in (EventType.LOG, EventType.SYSTEM)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    written = read_events(path)
    assert len(written) == 600 and {e["type"] for e in written} == {"log", "system"}


def test_the_run_spec_carries_the_sampling_interval(tmp_path: Path) -> None:
    base = {"model": {"name": "m"}, "train": "t.jsonl", "out": str(tmp_path)}
    assert RunSpec.from_dict(base).system_sample_seconds == 15.0
    spec = RunSpec.from_dict({**base, "system_sample_seconds": 0.5})
    assert spec.system_sample_seconds == 0.5
    assert RunSpec.from_dict(spec.to_dict()).system_sample_seconds == 0.5
    with pytest.raises(ConfigError) as raised:
        RunSpec.from_dict({**base, "system_sample_seconds": -1})
    assert raised.value.issues[0].field == "system_sample_seconds"
