"""Baseline then final evaluation of the real MiniLM encoder on a generated 3-class dataset."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.data import write_jsonl
from tests.integration.eval.eval_data import TOPICS, topic_rows
from tunedeck.config.loading import validate_config
from tunedeck.data.loading import load_dataset
from tunedeck.eval.baseline import BaselineEvaluator
from tunedeck.eval.result import BASELINE_EVAL_FILE, FINAL_EVAL_FILE
from tunedeck.eval.trained_model import load_trained_model


def test_minilm_baseline_is_near_chance_and_training_lifts_every_class(minilm_dir: Path, tmp_path: Path) -> None:
    from transformers import set_seed

    from tunedeck.engine.host.hardware import detect_hardware
    from tunedeck.engine.models.model_loading import load_model, load_tokenizer
    from tunedeck.engine.models.model_source import ModelRef, resolve_model
    from tunedeck.engine.training.run_spec import RunSpec
    from tunedeck.engine.training.training_run import run_training

    train = write_jsonl(tmp_path / "train.jsonl", topic_rows(8, seed=1))
    validation = write_jsonl(tmp_path / "validation.jsonl", topic_rows(6, seed=2))
    config = validate_config(
        {
            "task": "classification", "epochs": 2, "batch_size": 8, "gradient_accumulation_steps": 1,
            "learning_rate": 3e-3, "warmup_ratio": 0.0, "mixed_precision": "fp32", "gradient_checkpointing": False,
            "save_strategy": "no", "eval_strategy": "no", "logging_steps": 1, "max_length": 32,
            "lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.0,
        }
    )  # fmt: skip
    rows = load_dataset(validation)
    label2id = {label: index for index, label in enumerate(sorted(TOPICS))}
    evaluator = BaselineEvaluator.from_file(config, validation, label2id=label2id)  # as the engine calls it
    run_dir = tmp_path / "run"
    # The engine writes both files into its run directory; here they go beside it, since the
    # engine refuses to start in a folder that already holds files.
    eval_dir = tmp_path / "evals"

    # The starting model as the engine loads it: the pretrained encoder with a fresh, seeded head.
    resolved = resolve_model(ModelRef(str(minilm_dir)))
    tokenizer = load_tokenizer(resolved, config)
    set_seed(config.seed)
    start = load_model(resolved, config, detect_hardware(), "fp32", tokenizer, label2id)
    eval_dir.mkdir()
    baseline = evaluator.run_baseline(start.model, tokenizer, eval_dir)

    result = run_training(RunSpec(config=config, model=ModelRef(str(minilm_dir)), train_path=train,
                                  validation_path=validation, out_dir=run_dir))  # fmt: skip
    assert result.status == "succeeded"
    trained = load_trained_model(run_dir / "final", base_model_dir=minilm_dir)
    final = evaluator.run_final(trained.model, trained.tokenizer, eval_dir)

    before, after = baseline["metrics"], final["metrics"]
    assert before["accuracy"] <= 0.6 and before["macro_f1"] <= 0.5  # chance is 1/3 on three balanced classes
    assert after["accuracy"] >= 0.9 and after["macro_f1"] >= 0.9
    for label in TOPICS:
        assert after["per_class"][label]["support"] == 6
        assert after["per_class"][label]["f1"] > before["per_class"][label]["f1"]
    assert sum(map(sum, after["confusion_matrix"]["matrix"])) == 18
    assert {"eval_loss", "eval_perplexity"} <= after.keys()
    # Same procedure, provably: both files carry the same hash, and every example has its output.
    written = {name: json.loads((eval_dir / name).read_text()) for name in (BASELINE_EVAL_FILE, FINAL_EVAL_FILE)}
    assert written[BASELINE_EVAL_FILE]["procedure_sha256"] == written[FINAL_EVAL_FILE]["procedure_sha256"]
    assert written[FINAL_EVAL_FILE]["procedure"]["labels"] == ["food", "sport", "weather"]
    assert [e["reference"] for e in written[FINAL_EVAL_FILE]["examples"]] == [r["label"] for r in rows.rows]
