"""The `optim` key: Adafactor trains every weight and keeps far less optimizer state than AdamW."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, write_chat
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def _optimizer_state_bytes(run_dir: Path) -> int:
    (state,) = run_dir.glob("checkpoints/checkpoint-*/optimizer.pt")
    return state.stat().st_size


@pytest.mark.slow
def test_adafactor_learns_with_a_fraction_of_adamws_optimizer_state(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 32)
    sizes: dict[str, int] = {}
    for optim in ("adamw", "adafactor"):
        config = fast_config(
            use_peft=False, epochs=3, learning_rate=1e-3, optim=optim, save_strategy="steps", save_steps=12
        )
        run_dir = tmp_path / f"run-{optim}"
        result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, run_dir))
        assert result.status == "succeeded" and result.global_step == 12
        assert result.first_loss is not None and result.last_loss is not None
        assert result.last_loss < result.first_loss * 0.8, (optim, result.first_loss, result.last_loss)
        sizes[optim] = _optimizer_state_bytes(run_dir)
    # AdamW keeps two full-size moments per weight; Adafactor a row and a column per matrix.
    assert sizes["adafactor"] < sizes["adamw"] / 4, sizes
