"""Quality diagnoses on real runs: a run that never updated its weights fails, a broken guard warns."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, read_json, write_chat
from tunedeck.core.errors import ConfigError
from tunedeck.core.events import read_events
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.engine.training.training_run import RunFailedError, run_training


def _diagnoses(run: Path) -> list[dict[str, object]]:
    return [event for event in read_events(run / "events.jsonl") if event["type"] == "diagnosis"]


def test_a_single_step_run_is_no_longer_all_warmup(tiny_llama_dir: Path, tmp_path: Path) -> None:
    train = write_chat(tmp_path, 8)
    run = tmp_path / "run"
    result = run_training(RunSpec(fast_config(warmup_ratio=0.1), ModelRef(str(tiny_llama_dir)), train, run))

    assert result.status == "succeeded" and result.global_step == 1
    assert read_json(run / "config.json")["derived"]["warmup_steps"] == 0
    (metric,) = [event for event in read_events(run / "events.jsonl") if event["type"] == "metric"]
    assert metric["learning_rate"] == pytest.approx(3e-3)


def test_a_schedule_with_every_step_at_rate_0_is_refused_before_the_run(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The warmup as it used to round: a one-step run all warmup, its only step at a learning rate of 0.
    monkeypatch.setattr("tunedeck.config.derived.warmup_steps_for", lambda ratio, total: math.ceil(total * ratio))
    train = write_chat(tmp_path, 8)
    with pytest.raises(ConfigError, match="would run at learning rate 0") as refused:
        run_training(RunSpec(fast_config(warmup_ratio=0.1), ModelRef(str(tiny_llama_dir)), train, tmp_path / "run"))
    assert refused.value.issues[0].field == "warmup_ratio"
    assert not (tmp_path / "run").exists()


def test_a_run_that_never_updated_its_weights_fails_with_the_no_update_diagnosis(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tunedeck.config.derived.warmup_steps_for", lambda ratio, total: math.ceil(total * ratio))
    monkeypatch.setattr("tunedeck.engine.training.run_plan.schedule_refusals", lambda *args, **kwargs: [])
    train = write_chat(tmp_path, 8)
    run = tmp_path / "run"
    with pytest.raises(RunFailedError, match="never updated"):
        run_training(RunSpec(fast_config(warmup_ratio=0.1), ModelRef(str(tiny_llama_dir)), train, run))

    (diagnosis,) = _diagnoses(run)
    assert diagnosis["kind"] == "no_update"
    assert "every logged learning rate of the 1 optimizer step(s) was 0" in str(diagnosis["message"])
    results = read_json(run / "results.json")
    assert results["status"] == "failed" and results["global_step"] == 1
    assert not (run / "final").exists()


def test_a_broken_guard_warns_with_the_baseline_and_final_values_and_the_run_succeeds(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    train = write_chat(tmp_path, 16)
    validation = write_chat(tmp_path, 8, name="validation.jsonl")
    run = tmp_path / "run"
    spec = RunSpec(
        fast_config(epochs=2, batch_size=4),
        ModelRef(str(tiny_llama_dir)),
        train,
        run,
        validation_path=validation,
        guards=["eval_loss <= 0.0001", "eval_perplexity <= baseline + 1000000"],
    )

    result = run_training(spec)

    assert result.status == "succeeded"
    baseline = read_json(run / "baseline_eval.json")["metrics"]["eval_loss"]
    final = read_json(run / "final_eval.json")["metrics"]["eval_loss"]
    guarded = [d for d in _diagnoses(run) if d["kind"] == "guard_regression"]
    assert [d["figures"]["guard"] for d in guarded] == ["eval_loss <= 0.0001"]  # type: ignore[index]
    assert guarded[0]["figures"] == {  # type: ignore[comparator-overlap]
        "guard": "eval_loss <= 0.0001", "metric": "eval_loss", "baseline": baseline, "final": final,
        "bound": 0.0001, "passed": False,
    }  # fmt: skip
    assert f"baseline {baseline:.6g}, final {final:.6g}" in str(guarded[0]["message"])
    kept = read_json(run / "results.json")["diagnostics"]["quality"]
    assert [entry["kind"] for entry in kept] == [d["kind"] for d in _diagnoses(run)]
