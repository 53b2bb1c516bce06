"""Specs for the preflight tests: chat data and a CPU-friendly config in the test's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.engine.engine_data import fast_config, write_chat
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.preflight import PreflightOptions
from tunedeck.engine.training.run_spec import RunSpec

# Small enough for two CPU cores; each check still does what it does on a GPU.
FAST_OPTIONS = PreflightOptions(overfit_steps=12, throughput_steps=3, throughput_warmup_steps=1)


def chat_spec(model: Path, folder: Path, rows: int = 16, **config: Any) -> RunSpec:
    """A RunSpec over `rows` chat examples with `fast_config(**config)`."""
    train = write_chat(folder, rows)
    return RunSpec(fast_config(**config), ModelRef(str(model)), train, folder / "run")
