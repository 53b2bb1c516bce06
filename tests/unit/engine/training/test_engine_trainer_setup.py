"""The trainer's arguments carry the config's options as the config means them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunedeck.config.derived import derive_values
from tunedeck.config.loading import config_schema, validate_config
from tunedeck.engine.host.hardware import cpu_profile
from tunedeck.engine.training.trainer_setup import training_arguments


@pytest.mark.parametrize("compile_model", [False, True])
def test_torch_compile_reaches_the_training_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compile_model: bool
) -> None:
    # TrainingArguments exports the dynamo backend to the environment when compiling; keep it local.
    monkeypatch.delenv("ACCELERATE_DYNAMO_BACKEND", raising=False)
    config = validate_config({"torch_compile": compile_model, "mixed_precision": "fp32"})
    args = training_arguments(config, derive_values(config, 64), cpu_profile(), "fp32", tmp_path, False)
    assert args.torch_compile is compile_model


def test_torch_compile_is_off_by_default_until_measured() -> None:
    assert validate_config({}).torch_compile is False
    described = config_schema()["properties"]["torch_compile"]
    assert described["default"] is False
    assert "off until measured on your hardware" in described["description"].lower()
