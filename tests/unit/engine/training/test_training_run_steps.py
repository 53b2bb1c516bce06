"""`TrainingRun`'s steps need the ones before them; cleanup is safe whenever it runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunedeck.config.loading import validate_config
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import TrainingRun


def _run(tmp_path: Path) -> TrainingRun:
    config = validate_config({"task": "sft"})
    spec = RunSpec(config, ModelRef(str(tmp_path / "model")), tmp_path / "train.jsonl", tmp_path / "out",
                   validation_path=tmp_path / "validation.jsonl")
    return TrainingRun(spec)


@pytest.mark.parametrize(
    ("step", "needs"),
    [("evaluate_baseline", r"setup\(\)"), ("train", r"setup\(\)"), ("evaluate", r"setup\(\)"), ("save", r"train\(\)")],
)
def test_a_step_before_the_one_it_needs_says_so(tmp_path: Path, step: str, needs: str) -> None:
    with pytest.raises(RuntimeError, match=needs):
        getattr(_run(tmp_path), step)()


def test_cleanup_before_or_after_setup_is_harmless(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.cleanup()
    run.cleanup()
    assert not (tmp_path / "out").exists()
