"""Sequence classification with the real pretrained MiniLM encoder on a generated 3-class dataset."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.data import write_jsonl
from tests.integration.engine.engine_data import classification_rows, fast_config, read_json
from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training


def test_minilm_classifies_well_above_chance(minilm_dir: Path, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", classification_rows(8))
    validation = write_jsonl(tmp_path / "validation.jsonl", classification_rows(4, offset=1))
    config = fast_config(
        task="classification",
        epochs=2,
        learning_rate=2e-3,
        lora_r=8,
        lora_alpha=16,
        eval_strategy="epoch",
        max_length=32,
    )
    spec = RunSpec(config, ModelRef(str(minilm_dir)), train, tmp_path / "run", validation_path=validation)
    result = run_training(spec)

    assert result.status == "succeeded"
    assert result.eval_metrics["eval_accuracy"] >= 0.8  # chance is 1/3
    evals = [event for event in read_events(tmp_path / "run" / "events.jsonl") if event["type"] == "eval"]
    assert len(evals) == 3  # one per epoch, then the final evaluation
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"]
    assert all({"eval_loss", "eval_accuracy", "eval_macro_f1"} <= event.keys() for event in evals)
    resolved = read_json(tmp_path / "run" / "config.json")
    assert resolved["label2id"] == {"food": 0, "sport": 1, "weather": 2}
    assert (tmp_path / "run" / "final" / "adapter_model.safetensors").is_file()
