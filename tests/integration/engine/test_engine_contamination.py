"""Validation rows that duplicate training rows are recorded as contamination in the run, with a warning."""

from __future__ import annotations

import json
from pathlib import Path

from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import run_training

from .engine_data import chat_rows, fast_config, read_json


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_overlap_between_train_and_validation_is_recorded(tiny_llama_dir: Path, tmp_path: Path) -> None:
    rows = chat_rows(16)
    train = _write(tmp_path / "train.jsonl", rows)
    validation = _write(tmp_path / "val.jsonl", rows[:2] + chat_rows(20)[16:])  # two copied rows, two new ones
    config = fast_config(epochs=1, eval_strategy="epoch", save_strategy="no")
    run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "run", validation_path=validation))

    record = read_json(tmp_path / "run" / "data_manifest.json")["contamination"]
    assert record["contaminated"] is True
    assert record["pairs_by_split"] == {"validation": 2}
    warnings = [e for e in read_events(tmp_path / "run" / "events.jsonl") if e.get("level") == "warning"]
    assert any("duplicate training rows" in e["message"] for e in warnings)


def test_separate_validation_data_is_clean(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = _write(tmp_path / "train.jsonl", chat_rows(16))
    validation = _write(tmp_path / "val.jsonl", chat_rows(20)[16:])
    config = fast_config(epochs=1, eval_strategy="epoch", save_strategy="no")
    run_training(RunSpec(config, ModelRef(str(tiny_llama_dir)), train, tmp_path / "run", validation_path=validation))
    assert read_json(tmp_path / "run" / "data_manifest.json")["contamination"]["contaminated"] is False
