"""Choosing DDP, FSDP or FSDP with offload from the projected training state, and keeping the global batch on resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunedeck.config.loading import validate_config
from tunedeck.core.errors import ConfigError
from tunedeck.core.rundir import CHECKPOINT_CONFIG
from tunedeck.engine.distributed.strategy import STATE_SHARE, choose_strategy, training_state_bytes
from tunedeck.engine.training.run_plan import accumulation_for_processes

GIB = 2**30


def test_auto_picks_the_cheapest_strategy_that_fits() -> None:
    config = validate_config({"devices": 4})
    device = 80 * GIB
    budget = device * STATE_SHARE
    fits = choose_strategy(config, 4, state_bytes=int(budget) - 1, device_bytes=device, backend="cuda")
    assert (fits.strategy, fits.cpu_offload, fits.per_device_state_bytes) == ("ddp", False, int(budget) - 1)
    shard = choose_strategy(config, 4, state_bytes=int(budget * 2), device_bytes=device, backend="cuda")
    assert (shard.strategy, shard.cpu_offload) == ("fsdp", False)
    assert shard.per_device_state_bytes == int(budget * 2) // 4 and "sharding" in shard.reason
    offload = choose_strategy(config, 4, state_bytes=int(budget * 5), device_bytes=device, backend="cuda")
    assert (offload.strategy, offload.cpu_offload) == ("fsdp", True) and "offloading" in offload.reason
    one = choose_strategy(validate_config({}), 1, state_bytes=10 * device, device_bytes=device, backend="cuda")
    assert one.strategy == "none"


def test_explicit_choices_are_kept_and_fsdp_needs_gpus() -> None:
    ddp = choose_strategy(validate_config({"devices": 2, "strategy": "ddp"}), 2, state_bytes=10**12,
                          device_bytes=GIB, backend="cuda")
    assert ddp.strategy == "ddp"
    config = validate_config({"devices": 2, "strategy": "fsdp", "fsdp_cpu_offload": True})
    assert choose_strategy(config, 2, state_bytes=1, device_bytes=GIB, backend="cuda").cpu_offload
    with pytest.raises(ConfigError, match="fsdp shards the training state across GPUs"):
        choose_strategy(validate_config({"devices": 0, "processes": 2, "strategy": "fsdp"}), 2,
                        state_bytes=1, device_bytes=None, backend="cpu")


def test_training_state_counts_weights_gradients_and_optimizer() -> None:
    full = validate_config({"use_peft": False})
    assert training_state_bytes(full, 1000, 1000, "bf16") == 1000 * 2 + 1000 * 12
    lora = validate_config({"optim": "adamw_8bit"})
    assert training_state_bytes(lora, 1000, 10, "fp32") == 1000 * 4 + 10 * 6


def _checkpoint(tmp_path: Path, processes: int) -> Path:
    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    (folder / CHECKPOINT_CONFIG).write_text(json.dumps({"derived": {"processes": processes}}), encoding="utf-8")
    return folder


def test_resuming_on_another_process_count_keeps_the_global_batch(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path, 2)
    config = validate_config({"gradient_accumulation_steps": 3})
    assert accumulation_for_processes(config, checkpoint, 1).gradient_accumulation_steps == 6
    assert accumulation_for_processes(config, checkpoint, 2) is config
    assert accumulation_for_processes(config, checkpoint, 3).gradient_accumulation_steps == 2
    with pytest.raises(ConfigError, match="cannot be split evenly over 4 processes"):
        accumulation_for_processes(config, checkpoint, 4)
    assert accumulation_for_processes(config, tmp_path, 4) is config  # no record: as it is


def test_a_sharded_checkpoint_resumes_under_fsdp_on_any_count_of_gpus() -> None:
    config = validate_config({})
    one = choose_strategy(config, 1, state_bytes=1, device_bytes=GIB, backend="cuda", resuming_shards=True)
    assert one.strategy == "fsdp" and "sharded checkpoint" in one.reason
    with pytest.raises(ConfigError, match="resume it on GPUs"):
        choose_strategy(config, 2, state_bytes=1, device_bytes=None, backend="cpu", resuming_shards=True)
