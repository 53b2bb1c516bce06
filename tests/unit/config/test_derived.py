"""Derived schedule values match the trainer's arithmetic."""

from __future__ import annotations

import pytest

from tunedeck.config.derived import derive_values
from tunedeck.config.loading import validate_config


def test_steps_count_a_short_last_batch_and_a_short_accumulation_window() -> None:
    config = validate_config({"epochs": 3, "batch_size": 4, "gradient_accumulation_steps": 2, "warmup_ratio": 0.1})
    derived = derive_values(config, train_examples=30)
    assert derived.micro_batches_per_epoch == 8  # 30 / 4 rounded up
    assert derived.steps_per_epoch == 4
    assert derived.total_steps == 12
    assert derived.warmup_steps == 2  # ceil(12 × 0.1)
    assert derived.effective_batch_size == 8


def test_effective_batch_size_multiplies_processes() -> None:
    config = validate_config({"batch_size": 4, "gradient_accumulation_steps": 8})
    assert derive_values(config, 1000, processes=2).effective_batch_size == 64


def test_constant_schedule_has_no_warmup_and_tiny_sets_still_take_a_step() -> None:
    config = validate_config({"lr_scheduler": "constant", "warmup_ratio": 0.5, "epochs": 1})
    derived = derive_values(config, train_examples=1)
    assert derived.total_steps == 1
    assert derived.warmup_steps == 0


def test_empty_training_set_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        derive_values(validate_config({}), 0)
