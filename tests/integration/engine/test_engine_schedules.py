"""The learning rate of every step, for each of the five schedulers with warmup, point by point."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, metric_events, read_json, write_chat
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training

PEAK = 1e-3
TOTAL = 10  # 40 examples, batch 4 → 10 optimizer steps
WARMUP = 3  # ceil(10 × 0.25)
POWER = 2.0


def _decay(step: int) -> float:
    """Share of the decay phase still ahead at `step` (1 when it starts, 0 at the end)."""
    return (TOTAL - step) / (TOTAL - WARMUP)


SHAPES: dict[str, Callable[[int], float]] = {
    "linear": lambda s: PEAK * _decay(s),
    "cosine": lambda s: PEAK * 0.5 * (1 + math.cos(math.pi * (1 - _decay(s)))),
    "polynomial": lambda s: PEAK * _decay(s) ** POWER,
    "constant_with_warmup": lambda s: PEAK,
}


def expected_rate(scheduler: str, step: int) -> float:
    """The rate used by optimizer step `step + 1`: linear warmup from 0, then the schedule's shape."""
    if scheduler == "constant":
        return PEAK  # a fixed rate for the whole run: warmup belongs to constant_with_warmup
    if step < WARMUP:
        return PEAK * step / WARMUP
    return SHAPES[scheduler](step)


@pytest.mark.parametrize("scheduler", ["linear", "cosine", "polynomial", "constant", "constant_with_warmup"])
def test_learning_rate_trace_matches_the_schedule(scheduler: str, tiny_gpt2_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 40)
    config = fast_config(
        batch_size=4,
        learning_rate=PEAK,
        warmup_ratio=0.25,
        lr_scheduler=scheduler,
        polynomial_power=POWER,
        use_peft=False,
    )
    run_training(RunSpec(config, ModelRef(str(tiny_gpt2_dir)), train, tmp_path / "run"))
    rates = [event["learning_rate"] for event in metric_events(tmp_path / "run")]
    expected = [expected_rate(scheduler, step) for step in range(TOTAL)]
    assert rates == pytest.approx(expected, rel=1e-9, abs=1e-15)
    recorded = read_json(tmp_path / "run" / "config.json")["derived"]["warmup_steps"]
    assert recorded == (0 if scheduler == "constant" else WARMUP)
