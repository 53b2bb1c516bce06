"""The speed monitor on a (faked) GPU: no host sync per step, and a split that still adds up."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tunedeck.config.loading import validate_config
from tunedeck.engine.training.training_speed import TrainingSpeedMonitor


class FakeDevice:
    """A device timeline: events complete only when the host waits for them (as a busy GPU's do)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.recorded = 0
        self.completed = 0  # events with a sequence number up to this one have completed
        self.synchronize_calls = 0

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def drain(self) -> None:
        """What a `.item()` on the loss does: the device catches up with everything queued."""
        self.completed = self.recorded

    def synchronize(self) -> None:
        self.synchronize_calls += 1
        self.drain()

    def event_class(self) -> type:
        device = self

        class FakeEvent:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing, "timing events are needed to read elapsed time"
                self.time: float | None = None
                self.sequence = 0

            def record(self, stream: Any = None) -> None:
                device.recorded += 1
                self.sequence, self.time = device.recorded, device.now

            def query(self) -> bool:
                return self.sequence <= device.completed

            def synchronize(self) -> None:
                device.synchronize()

            def elapsed_time(self, end: FakeEvent) -> float:
                assert self.query() and end.query(), "elapsed_time on an event that has not completed"
                assert self.time is not None and end.time is not None
                return (end.time - self.time) * 1000.0

        return FakeEvent


@pytest.fixture
def device(monkeypatch: pytest.MonkeyPatch) -> FakeDevice:
    fake = FakeDevice()
    monkeypatch.setattr(torch.cuda, "Event", fake.event_class())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: fake.synchronize())
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 2**30)
    return fake


def _train(monitor: TrainingSpeedMonitor, device: FakeDevice, steps: int, logging_steps: int) -> list[int]:
    """Drive the hooks in the trainer's order; returns the sync count seen after each step."""
    syncs_after_step = []
    monitor.on_train_begin(None, None, None)
    for step in range(1, steps + 1):
        device.advance(0.010)  # the device waits for the next batch
        monitor.on_step_begin(None, None, None)
        device.advance(0.050)  # forward, backward, optimizer
        monitor.on_step_end(None, None, None)
        if step % logging_steps == 0:
            device.drain()  # the trainer reads the loss on logging steps
            device.advance(0.002)
            monitor.on_log(None, None, None, logs={"loss": 1.0})
        syncs_after_step.append(device.synchronize_calls)
    monitor.on_train_end(None, None, None)
    return syncs_after_step


@pytest.mark.parametrize(("steps", "logging_steps"), [(100, 10), (60, 1), (45, 7)])
def test_no_host_sync_per_step_on_cuda(device: FakeDevice, steps: int, logging_steps: int) -> None:
    config = validate_config({"logging_steps": logging_steps})
    monitor = TrainingSpeedMonitor(config, "bf16", backend="cuda", accelerator_total_bytes=80 * 2**30)
    syncs_after_step = _train(monitor, device, steps, logging_steps)
    figures = monitor.figures()

    assert syncs_after_step[-1] == 0  # during training: none at all
    assert device.synchronize_calls <= steps / logging_steps + 2
    assert figures["steps_measured"] == steps
    assert figures["timed_on"] == "device"
    assert figures["data_seconds"] == pytest.approx(0.010 * steps, abs=1e-3)
    assert figures["compute_seconds"] == pytest.approx(0.050 * steps, abs=1e-3)
    assert figures["logging_seconds"] == pytest.approx(0.002 * (steps // logging_steps), abs=1e-3)
    assert figures["accelerator_peak_bytes"] == 2**30


def test_the_slow_diagnosis_still_fires_from_device_timings(device: FakeDevice) -> None:
    config = validate_config({"logging_steps": 5})
    monitor = TrainingSpeedMonitor(config, "bf16", backend="cuda")
    monitor.on_train_begin(None, None, None)
    for step in range(1, 31):
        device.advance(0.040)  # data loading takes almost as long as the step
        monitor.on_step_begin(None, None, None)
        device.advance(0.050)
        monitor.on_step_end(None, None, None)
        if step % 5 == 0:
            device.drain()
            monitor.on_log(None, None, None, logs={"loss": 1.0})
        if step == 20:
            assert monitor.diagnosis is not None  # judged on a logging step, without waiting
    assert device.synchronize_calls == 0
    assert monitor.diagnosis is not None and "data_loading" in monitor.diagnosis.figures["reasons"]


def test_cpu_timing_needs_no_device(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the CPU path touched torch.cuda")

    monkeypatch.setattr(torch.cuda, "synchronize", forbidden)
    monkeypatch.setattr(torch.cuda, "Event", forbidden)
    monitor = TrainingSpeedMonitor(validate_config({"logging_steps": 2}), "fp32", backend="cpu")
    monitor.on_train_begin(None, None, None)
    for step in range(1, 5):
        monitor.on_step_begin(None, None, None)
        monitor.on_step_end(None, None, None)
        if step % 2 == 0:
            monitor.on_log(None, None, None, logs={})
    figures = monitor.figures()
    assert figures["steps_measured"] == 4 and figures["timed_on"] == "host"
