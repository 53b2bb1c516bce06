"""Whole-dataset packing trains one packed row per micro-batch and keeps the effective batch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tunedeck.config.loading import validate_config
from tunedeck.config.packed_batches import describe_packed_steps, packed_row_steps


@pytest.mark.parametrize(("batch_size", "accumulation"), [(8, 1), (4, 3), (2, 2)])
def test_packing_true_splits_the_step_into_single_rows(batch_size: int, accumulation: int) -> None:
    config = validate_config({"packing": True, "batch_size": batch_size, "gradient_accumulation_steps": accumulation})
    trained = packed_row_steps(config)
    assert trained.batch_size == 1
    assert trained.gradient_accumulation_steps == batch_size * accumulation
    assert trained.packing is True and trained.learning_rate == config.learning_rate
    line = describe_packed_steps(config, trained)
    assert line is not None and f"{batch_size * accumulation} accumulated per optimizer step" in line


@pytest.mark.parametrize("packing", ["auto", False])
def test_other_packing_choices_train_the_batch_as_asked(packing: object) -> None:
    config = validate_config({"packing": packing, "batch_size": 8, "gradient_accumulation_steps": 2})
    assert packed_row_steps(config) == config
    assert describe_packed_steps(config, packed_row_steps(config)) is None


def test_a_batch_of_one_packed_row_is_left_as_it_is() -> None:
    config = validate_config({"packing": True, "batch_size": 1, "gradient_accumulation_steps": 4})
    assert packed_row_steps(config) == config


def test_the_checks_before_training_measure_the_micro_batch_the_run_trains(tmp_path: Path) -> None:
    from tunedeck.engine.host.hardware import detect_hardware
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.preflight.context import PreflightContext, PreflightOptions
    from tunedeck.engine.training.run_spec import RunSpec

    config = validate_config({"packing": True, "batch_size": 8, "gradient_accumulation_steps": 2})
    spec = RunSpec(config, ModelRef("local-model"), tmp_path / "train.jsonl", tmp_path / "run")
    ctx = PreflightContext(spec=spec, hardware=detect_hardware(), options=PreflightOptions(), work_dir=tmp_path)
    assert (ctx.config.batch_size, ctx.accumulation) == (1, 16)

    from tunedeck.engine.host.memory_fit import MemoryPoint, decide_micro_batch
    from tunedeck.engine.preflight.runner import _memory_fit

    points = [MemoryPoint(1, 2**30), MemoryPoint(2, 2**30 + 2**28)]
    ctx.memory_fit = decide_micro_batch(points, 8 * 2**30, ctx.micro_batch, ctx.accumulation, cap_source="host")
    fit = _memory_fit(ctx)
    assert fit is not None and (fit["micro_batch"], fit["accumulation"]) == (1, 16)
    assert "batch_size 8 × gradient_accumulation_steps 2" in fit["packed_rows"]
    unpacked = dataclasses.replace(spec, config=validate_config({"batch_size": 8}))
    ctx.spec = unpacked
    assert "packed_rows" not in (_memory_fit(ctx) or {})
