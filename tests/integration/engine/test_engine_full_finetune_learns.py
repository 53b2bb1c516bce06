"""Full fine-tuning visibly learns: the tiny Llama overfits 32 chat examples with every weight trained."""

from __future__ import annotations

from pathlib import Path

from tests.integration.engine.engine_data import fast_config, metric_events, write_chat
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def test_full_finetuning_overfits_32_chat_examples(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 32)
    config = fast_config(use_peft=False, epochs=5, learning_rate=1e-3, warmup_ratio=0.1, lr_scheduler="cosine")
    result = run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "run"))

    assert result.status == "succeeded" and result.global_step == 20
    assert result.model["trainable_parameters"] == result.model["total_parameters"]  # every weight trains
    assert result.first_loss is not None and result.last_loss is not None
    assert result.last_loss < result.first_loss / 2, (result.first_loss, result.last_loss)
    losses = [event["loss"] for event in metric_events(tmp_path / "run")]
    assert min(losses[-4:]) < losses[0] / 2  # the fall holds over the last epoch, not one lucky batch
