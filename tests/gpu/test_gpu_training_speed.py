"""On a real GPU: the speed monitor times steps with CUDA events, without a host sync per step; bf16 is native only."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tunedeck.config.loading import validate_config
from tunedeck.engine.host.hardware import detect_hardware
from tunedeck.engine.training.training_speed import TrainingSpeedMonitor


@pytest.mark.gpu
def test_the_speed_monitor_adds_no_host_sync_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    syncs = {"count": 0}
    device_sync, event_sync = torch.cuda.synchronize, torch.cuda.Event.synchronize

    def counted_device_sync(device: Any = None) -> None:
        syncs["count"] += 1
        device_sync(device)

    def counted_event_sync(event: Any) -> None:
        syncs["count"] += 1
        event_sync(event)

    monkeypatch.setattr(torch.cuda, "synchronize", counted_device_sync)
    monkeypatch.setattr(torch.cuda.Event, "synchronize", counted_event_sync)
    steps, logging_steps = 60, 10
    monitor = TrainingSpeedMonitor(validate_config({"logging_steps": logging_steps}), "bf16", backend="cuda")
    x = torch.randn(2048, 2048, device="cuda")
    device_sync()
    started = time.perf_counter()
    monitor.on_train_begin(None, None, None)
    for step in range(1, steps + 1):
        monitor.on_step_begin(None, None, None)
        for _ in range(4):
            x = torch.tanh(x @ x)  # queued: the host runs ahead of the device
        monitor.on_step_end(None, None, None)
        if step % logging_steps == 0:
            float(x.sum())  # what the trainer's loss read does on a logging step
            monitor.on_log(None, None, None, logs={"loss": 1.0})
    monitor.on_train_end(None, None, None)
    figures = monitor.figures()
    wall = time.perf_counter() - started
    print("speed figures:", figures, "wall seconds:", round(wall, 4), "syncs:", syncs["count"])

    assert syncs["count"] <= steps / logging_steps + 2
    assert figures["steps_measured"] == steps and figures["timed_on"] == "device"
    timed = figures["data_seconds"] + figures["compute_seconds"] + figures["logging_seconds"]
    assert 0.5 * wall < timed <= wall * 1.05  # device time of the whole loop, not the host's queueing
    assert figures["compute_share"] > 0.9  # the device was busy with steps, not waiting for data


@pytest.mark.gpu
def test_bf16_is_reported_only_where_the_gpu_has_bf16_units() -> None:
    hardware = detect_hardware()
    if hardware.backend == "cuda":
        assert hardware.capability is not None
        assert hardware.supports_bf16 is (hardware.capability >= (8, 0))
