"""The baseline/final evaluation procedure at every evaluation during training (eval_generation_each_eval)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.data import write_jsonl
from tests.integration.engine.engine_data import (
    OTHER_ANSWERS,
    chat_rows,
    classification_rows,
    fast_config,
    read_json,
    write_chat,
)
from tunedeck.core.events import read_events
from tunedeck.engine.generation.generation_eval import GenerationEvalCallback, procedure_metrics
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training
from tunedeck.eval.baseline import BaselineEvaluator

GEN_KEYS = {"eval_gen_exact_match", "eval_gen_token_f1"}


def _run(tiny_llama_dir: Path, tmp_path: Path, **overrides: Any) -> tuple[Any, list[dict[str, Any]]]:
    train = write_chat(tmp_path, 16)
    # Two training rows (learnt) and two with answers never trained on: the metrics end between 0 and 1.
    validation = write_jsonl(tmp_path / "validation.jsonl", chat_rows(2) + chat_rows(4, answers=OTHER_ANSWERS)[2:])
    # 16 rows, micro-batch 8, 8 epochs: 16 steps, evaluated at steps 8 and 16, then the final evaluation.
    config = fast_config(epochs=8, learning_rate=1e-2, eval_strategy="steps", eval_steps=8, **overrides)
    spec = RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "run", validation_path=validation)
    result = run_training(spec)
    evals = [event for event in read_events(tmp_path / "run" / "events.jsonl") if event["type"] == "eval"]
    return result, evals


def test_each_evaluation_reports_the_procedure_metrics_and_the_last_equals_the_final(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []
    original = BaselineEvaluator.evaluate

    def counted(self: BaselineEvaluator, model: Any, tokenizer: Any) -> Any:
        calls.append(bool(model.training))
        return original(self, model, tokenizer)

    monkeypatch.setattr(BaselineEvaluator, "evaluate", counted)
    result, evals = _run(tiny_llama_dir, tmp_path, eval_generation_each_eval=True)

    assert result.status == "succeeded" and result.global_step == 16
    assert [event["step"] for event in evals] == [8, 16, 16]  # the last is the final trainer.evaluate()
    for event in evals:
        assert event.keys() >= GEN_KEYS, sorted(event)
        assert not any("loss" in key or "perplexity" in key for key in event if key.startswith("eval_gen_"))
        assert "eval_loss" in event
    run = tmp_path / "run"
    final, baseline = read_json(run / "final_eval.json"), read_json(run / "baseline_eval.json")
    assert final["procedure_sha256"] == baseline["procedure_sha256"]
    # The evaluation at the last step, made during training, gives the final evaluation's numbers.
    in_training = evals[1]
    assert in_training["eval_gen_exact_match"] == final["metrics"]["exact_match"]
    assert in_training["eval_gen_token_f1"] == final["metrics"]["token_f1"]
    assert final["metrics"]["token_f1"] > baseline["metrics"]["token_f1"]  # learned: the equality is not 0 == 0
    assert result.eval_metrics is not None
    assert result.eval_metrics["eval_token_f1"] == final["metrics"]["token_f1"]
    assert not any(key.startswith("eval_gen_") for key in result.eval_metrics)  # no duplicates in results
    # Cheap: baseline, two evaluations during training, and the final reuses the trainer's last evaluation.
    assert len(calls) == 4


def test_without_the_key_eval_events_carry_only_the_trainer_metrics(tiny_llama_dir: Path, tmp_path: Path) -> None:
    result, evals = _run(tiny_llama_dir, tmp_path)
    assert result.status == "succeeded"
    assert [event["step"] for event in evals] == [8, 16, 16]
    assert all(not any(key.startswith("eval_gen_") for key in event) for event in evals)
    assert (tmp_path / "run" / "final_eval.json").is_file()  # the final evaluation still runs


class _FixedEvaluator:
    def __init__(self, metrics: dict[str, Any]) -> None:
        self.metrics = metrics
        self.seen_training: list[bool] = []

    def evaluate(self, model: Any, tokenizer: Any) -> Any:
        model.eval()  # as run_procedure does
        self.seen_training.append(model.training)
        return type("Result", (), {"metrics": self.metrics})()


def test_the_callback_flattens_per_class_metrics_and_leaves_the_model_training() -> None:
    import torch

    report = {
        "loss": 0.5,
        "perplexity": 1.6,
        "num_examples": 6,
        "accuracy": 0.5,
        "macro_f1": 0.4,
        "per_class": {"spam": {"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "support": 2}},
        "confusion_matrix": {"labels": ["spam", "ham"], "matrix": [[1, 1], [0, 2]]},
    }
    callback = GenerationEvalCallback(_FixedEvaluator(report), tokenizer=None)
    model = torch.nn.Linear(2, 2)
    metrics: dict[str, Any] = {"eval_loss": 0.7, "eval_accuracy": 0.4}
    callback.on_train_begin(None, None, None)
    model.eval()  # the trainer's evaluation loop leaves it so
    callback.on_evaluate(None, None, None, metrics=metrics, model=model)
    assert model.training
    assert metrics == {
        "eval_loss": 0.7,
        "eval_accuracy": 0.4,
        "eval_gen_accuracy": 0.5,
        "eval_gen_macro_f1": 0.4,
        "eval_gen_per_class.spam.precision": 1.0,
        "eval_gen_per_class.spam.recall": 0.5,
        "eval_gen_per_class.spam.f1": 2 / 3,
    }
    assert callback.take_result() is not None and callback.take_result() is None
    callback.on_train_end(None, None, None)
    callback.on_evaluate(None, None, None, metrics={}, model=model)
    assert not model.training  # after training (the final evaluation) the model stays in eval mode
    assert procedure_metrics({"fields": {"x" * 200: {"present_rate": 1.0}}}) == {}  # too long for a series name


def test_a_procedure_metric_can_rank_checkpoints_and_stop_early(tiny_llama_dir: Path, tmp_path: Path) -> None:
    # The callback runs before the trainer ranks the evaluation and before early stopping reads it.
    result, evals = _run(
        tiny_llama_dir,
        tmp_path,
        eval_generation_each_eval=True,
        metric_for_best_model="gen_token_f1",
        early_stopping_patience=5,
    )
    assert result.status == "succeeded"
    assert result.best_metric == max(event["eval_gen_token_f1"] for event in evals[:-1])


def test_classification_evaluations_carry_the_per_class_scores(tiny_bert_dir: Path, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", classification_rows(4))
    validation = write_jsonl(tmp_path / "validation.jsonl", classification_rows(2, offset=1))
    config = fast_config(task="classification", eval_strategy="epoch", max_length=32, eval_generation_each_eval=True)
    spec = RunSpec(config, ModelRef(str(tiny_bert_dir)), train, tmp_path / "run", validation_path=validation)
    assert run_training(spec).status == "succeeded"

    evals = [event for event in read_events(tmp_path / "run" / "events.jsonl") if event["type"] == "eval"]
    final = read_json(tmp_path / "run" / "final_eval.json")["metrics"]
    assert len(evals) == 2  # the epoch's evaluation, then the final one, on the same weights
    for event in evals:
        assert {"eval_accuracy", "eval_gen_accuracy", "eval_gen_macro_f1"} <= event.keys()
        for label in ("food", "sport", "weather"):
            for score in ("precision", "recall", "f1"):
                assert event[f"eval_gen_per_class.{label}.{score}"] == final["per_class"][label][score]
        assert event["eval_gen_accuracy"] == final["accuracy"]
