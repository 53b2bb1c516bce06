"""One LoRA run on the tiny Llama shared by the export tests: 20 steps, a checkpoint every 4."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, write_chat
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training

MID_RUN_STEP = 4
QUESTION = "What is two plus two? (0)"  # a training prompt: the trained model answers it
ANSWER = "Four."


@pytest.fixture(scope="session")
def lora_run(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished LoRA run directory: 160 chat rows, one epoch of 20 steps, checkpoints at 4, 8, ... 20.

    One epoch, so that the bundle's config re-runs in 2 steps on 16 rows.
    """
    folder = tmp_path_factory.mktemp("export-run")
    train = write_chat(folder, 160)
    config = fast_config(epochs=1, learning_rate=5e-3, save_strategy="steps", save_steps=MID_RUN_STEP)
    result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, folder / "run"))
    assert result.status == "succeeded" and result.global_step == 20
    return folder / "run"


@pytest.fixture(scope="session")
def other_base_dir(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama with one config value changed: it loads the same way but is not the same model."""
    folder = tmp_path_factory.mktemp("other-base") / "model"
    shutil.copytree(tiny_llama_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    config["rms_norm_eps"] = config.get("rms_norm_eps", 1e-6) * 2
    (folder / "config.json").write_text(json.dumps(config))
    return folder
