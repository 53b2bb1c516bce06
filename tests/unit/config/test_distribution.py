"""The device, process, machine and strategy keys: validation, contradictions, and the placement they give."""

from __future__ import annotations

import pytest

from tunedeck.config.distribution import placement
from tunedeck.config.loading import validate_config
from tunedeck.core.errors import ConfigError


def _issues(config: dict[str, object]) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        validate_config(config)
    return {issue.field or "": issue.message for issue in caught.value.issues}


def test_counts_take_auto_or_a_whole_number_in_range() -> None:
    assert validate_config({"devices": 4}).devices == 4
    assert validate_config({"devices": "auto"}).devices == "auto"
    for bad in (-1, 65, "two", True, 1.5):
        assert _issues({"devices": bad}) == {"devices": 'expected "auto" or a whole number from 0 to 64'}
    assert _issues({"processes": 0}) == {"processes": 'expected "auto" or a whole number from 1 to 64'}


def test_contradictions_name_the_field() -> None:
    assert "one process per device" in _issues({"devices": 2, "processes": 3})["processes"]
    assert "explicit device count" in _issues({"processes": 2})["processes"]
    assert "one process" in _issues({"devices": 2, "strategy": "none"})["strategy"]
    assert "fsdp" in _issues({"devices": 2, "strategy": "ddp", "fsdp_cpu_offload": True})["fsdp_cpu_offload"]
    assert "qlora" in _issues({"devices": 2, "strategy": "fsdp", "peft_method": "qlora"})["strategy"]
    validate_config({"devices": 0, "processes": 2, "strategy": "ddp"})  # several CPU processes are fine


def test_placement_follows_the_keys() -> None:
    default = placement(validate_config({}))
    assert (default.devices, default.processes, default.hide_devices, default.world_size) == (0, 1, False, 1)
    cpu = placement(validate_config({"devices": 0, "processes": 2}))
    assert (cpu.devices, cpu.processes, cpu.hide_devices) == (0, 2, True)
    gpus = placement(validate_config({"devices": 4, "machines": 2}))
    assert (gpus.devices_needed, gpus.processes, gpus.world_size, gpus.hide_devices) == (4, 4, 8, False)
