"""Early stopping on a validation loss that stops improving, and restoring the best checkpoint."""

from __future__ import annotations

from pathlib import Path

from safetensors.torch import load_file

from tests.integration.engine.engine_data import OTHER_ANSWERS, fast_config, write_chat
from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def _adapter(folder: Path) -> dict:
    return load_file(folder / "adapter_model.safetensors")


def test_early_stopping_ends_before_the_last_epoch_and_load_best_restores_the_best(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    train = write_chat(tmp_path, 16)
    # Same questions, other answers: the better the model fits training, the worse validation gets.
    validation = write_chat(tmp_path, 8, name="validation.jsonl", answers=OTHER_ANSWERS)
    config = fast_config(
        epochs=10,
        learning_rate=1e-2,
        eval_strategy="epoch",
        save_strategy="epoch",
        load_best_model_at_end=True,
        early_stopping_patience=2,
        early_stopping_threshold=0.0,
    )
    spec = RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "run", validation_path=validation)
    result = run_training(spec)

    evals = [event for event in read_events(tmp_path / "run" / "events.jsonl") if event["type"] == "eval"]
    losses = [event["eval_loss"] for event in evals[:-1]]  # the last one is the final evaluation
    best_index = losses.index(min(losses))
    assert result.stopped_early
    assert result.global_step < result.total_steps == 20
    assert len(losses) == best_index + 3  # patience 2: two evaluations without improvement, then stop
    assert all(loss >= losses[best_index] for loss in losses[best_index + 1 :])

    best_step = evals[best_index]["step"]
    assert result.best_checkpoint is not None and result.best_checkpoint.endswith(f"checkpoint-{best_step}")
    best = _adapter(Path(result.best_checkpoint))
    final = _adapter(tmp_path / "run" / "final")
    last = _adapter(tmp_path / "run" / "checkpoints" / f"checkpoint-{result.global_step}")
    assert best.keys() == final.keys()
    assert all(bool((best[name] == final[name]).all()) for name in best)
    assert any(bool((last[name] != final[name]).any()) for name in last)  # not simply the last weights
    assert result.eval_metrics["eval_loss"] == min(losses)


def test_early_stopping_without_load_best(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 16)
    validation = write_chat(tmp_path, 8, name="validation.jsonl", answers=OTHER_ANSWERS)
    config = fast_config(
        epochs=10, learning_rate=1e-2, eval_strategy="epoch", early_stopping_patience=1, early_stopping_threshold=0.0
    )
    spec = RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "run", validation_path=validation)
    result = run_training(spec)
    assert result.stopped_early and result.global_step < result.total_steps
    assert not list((tmp_path / "run" / "checkpoints").glob("checkpoint-*"))  # save_strategy "no"
