"""Quality diagnoses from crafted metric traces: each one triggers on its own shape, a clean run triggers none."""

from __future__ import annotations

import math
import random

import pytest

from tunedeck.config.training import TrainingConfig
from tunedeck.eval.guards import evaluate_guards, parse_guards
from tunedeck.eval.quality_diagnosis import (
    EvalPoint,
    TrainPoint,
    early_plateau_diagnosis,
    guard_regression_diagnoses,
    no_update_diagnosis,
    overfitting_diagnosis,
    points_from_log_history,
    quality_diagnoses,
    rising_loss_diagnosis,
)

CONFIG = TrainingConfig(learning_rate=5e-5, epochs=3)
STEPS_PER_EPOCH = 40


def _trace(losses: list[float], rate: float = 5e-5) -> list[TrainPoint]:
    return [TrainPoint(step, step / STEPS_PER_EPOCH, loss, rate) for step, loss in enumerate(losses, start=1)]


def _noisy(values: list[float], amplitude: float = 0.03, seed: int = 3) -> list[float]:
    rng = random.Random(seed)
    return [value + rng.uniform(-amplitude, amplitude) for value in values]


def _healthy(count: int = 120) -> list[float]:
    """A decaying loss with noise: what a run that learns looks like."""
    return _noisy([0.6 + 1.8 * math.exp(-step / 25) for step in range(count)])


def _evals(losses: list[float], every: int = STEPS_PER_EPOCH) -> list[EvalPoint]:
    return [EvalPoint(every * index, float(index), loss) for index, loss in enumerate(losses, start=1)]


def test_a_clean_run_triggers_no_diagnosis() -> None:
    train = _trace(_healthy())
    evals = _evals([1.2, 1.0, 0.95])

    assert quality_diagnoses(train, evals, CONFIG, warmup_steps=12) == []
    assert no_update_diagnosis(train, len(train), CONFIG) is None


def test_a_single_spike_is_noise_not_a_rise() -> None:
    losses = _healthy()
    losses[80] = 9.0

    assert rising_loss_diagnosis(_trace(losses), CONFIG) is None


def test_a_sustained_rise_names_where_it_started_and_advises_a_lower_rate() -> None:
    down = [2.0 - 0.02 * step for step in range(60)]  # to about 0.82 at step 60
    up = [0.82 + 0.03 * step for step in range(60)]  # then back up to about 2.6
    diagnosis = rising_loss_diagnosis(_trace(_noisy(down + up, 0.01)), CONFIG)

    assert diagnosis is not None
    assert diagnosis.kind == "loss_rising"
    assert 55 <= diagnosis.figures["step"] <= 66
    assert diagnosis.figures["last_smoothed_loss"] > 2 * diagnosis.figures["lowest_smoothed_loss"]
    assert "Lower the learning rate (this run uses 5e-05; try 1e-05)." in diagnosis.advice
    assert f"step {diagnosis.figures['step']}" in diagnosis.message


def test_a_rise_that_came_back_down_is_not_reported() -> None:
    down = [2.0 - 0.02 * step for step in range(50)]
    bump = [1.0 + 0.05 * step for step in range(10)] + [1.5 - 0.05 * step for step in range(10)]
    tail = [1.0 - 0.005 * step for step in range(50)]

    assert rising_loss_diagnosis(_trace(down + bump + tail), CONFIG) is None


def test_an_early_plateau_is_reported_after_the_warmup() -> None:
    flat = _noisy([2.3] * 90, 0.01)
    diagnosis = early_plateau_diagnosis(_trace(flat), CONFIG, warmup_steps=9)

    assert diagnosis is not None
    assert diagnosis.kind == "loss_plateau"
    assert abs(diagnosis.figures["early_start_loss"] - 2.3) < 0.02
    assert any("learning rate may be too low" in line for line in diagnosis.advice)
    assert any(line.startswith("Check the data") for line in diagnosis.advice)


def test_a_flat_warmup_then_a_falling_loss_is_no_plateau() -> None:
    warmup = [2.3] * 20
    falling = [2.3 - 0.015 * step for step in range(100)]

    assert early_plateau_diagnosis(_trace(warmup + falling), CONFIG, warmup_steps=20) is None


def test_too_few_points_say_nothing_about_a_plateau() -> None:
    assert early_plateau_diagnosis(_trace([2.0, 2.0, 2.0, 2.0]), CONFIG) is None


def test_overfitting_names_the_epoch_and_step_where_validation_turned() -> None:
    train = _trace([2.0 - 0.012 * step for step in range(160)])  # falls all along
    evals = _evals([1.5, 1.2, 1.35, 1.6])  # lowest after epoch 2 (step 80), then up

    diagnosis = overfitting_diagnosis(train, evals, CONFIG)

    assert diagnosis is not None
    assert diagnosis.kind == "overfitting"
    assert diagnosis.figures["step"] == 80
    assert diagnosis.figures["epoch"] == 2.0
    assert diagnosis.figures["final_eval_loss"] == 1.6
    assert "since step 80 (epoch 2.00)" in diagnosis.message
    assert any("fewer epochs" in line and "lowest in epoch 2" in line for line in diagnosis.advice)
    assert any("weight_decay" in line for line in diagnosis.advice)


def test_validation_rising_with_training_rising_too_is_not_overfitting() -> None:
    train = _trace([1.0 + 0.01 * step for step in range(160)])
    evals = _evals([1.2, 1.1, 1.3, 1.5])

    assert overfitting_diagnosis(train, evals, CONFIG) is None


def test_a_validation_wobble_within_noise_is_not_overfitting() -> None:
    train = _trace([2.0 - 0.01 * step for step in range(160)])
    evals = _evals([1.5, 1.2, 1.205, 1.21])

    assert overfitting_diagnosis(train, evals, CONFIG) is None


def test_a_violated_guard_names_the_guard_baseline_and_final_values() -> None:
    guards = parse_guards(["json_valid_rate >= baseline", "accuracy >= 0.5"])
    baseline = {"json_valid_rate": 0.92, "accuracy": 0.4}
    final = {"json_valid_rate": 0.85, "accuracy": 0.7}

    diagnoses = guard_regression_diagnoses(evaluate_guards(guards, final, baseline), baseline)

    assert len(diagnoses) == 1
    (diagnosis,) = diagnoses
    assert diagnosis.kind == "guard_regression"
    assert diagnosis.figures["guard"] == "json_valid_rate >= baseline"
    assert (diagnosis.figures["baseline"], diagnosis.figures["final"]) == (0.92, 0.85)
    assert "`json_valid_rate >= baseline`: baseline 0.92, final 0.85" in diagnosis.message


def test_a_guard_within_tolerance_still_reports_what_the_baseline_lost() -> None:
    guards = parse_guards(["eval_loss <= baseline + 0.5", "per_class.spam.f1 >= 0.5"])
    baseline = {"eval_loss": 1.0, "per_class": {"spam": {"f1": 0.9}}}
    final = {"eval_loss": 0.8, "per_class": {"spam": {"f1": 0.7}}}

    diagnoses = guard_regression_diagnoses(evaluate_guards(guards, final, baseline), baseline)

    assert [d.figures["metric"] for d in diagnoses] == ["per_class.spam.f1"]
    assert diagnoses[0].figures["passed"] is True
    assert "is worse than the baseline" in diagnoses[0].message
    assert "baseline 0.9, final 0.7" in diagnoses[0].message


def test_guards_that_hold_without_loss_give_no_diagnosis() -> None:
    guards = parse_guards(["json_valid_rate >= baseline"])
    results = evaluate_guards(guards, {"json_valid_rate": 0.95}, {"json_valid_rate": 0.9})

    assert guard_regression_diagnoses(results, {"json_valid_rate": 0.9}) == []


@pytest.mark.parametrize(
    ("rates", "steps"),
    [([0.0], 1), ([0.0, 0.0, 0.0], 3), ([], 0)],
)
def test_a_run_that_never_updated_its_weights_is_diagnosed(rates: list[float], steps: int) -> None:
    points = [TrainPoint(step, None, 2.0, rate) for step, rate in enumerate(rates, start=1)]

    diagnosis = no_update_diagnosis(points, steps, CONFIG, warmup_steps=1)

    assert diagnosis is not None
    assert diagnosis.kind == "no_update"
    assert "never updated" in diagnosis.message
    assert any("warmup_ratio" in line for line in diagnosis.advice)


def test_one_step_at_a_real_rate_is_an_update() -> None:
    assert no_update_diagnosis([TrainPoint(1, 1.0, 2.0, 0.0), TrainPoint(2, 1.0, 2.0, 1e-5)], 2, CONFIG) is None


def test_points_are_read_from_a_trainer_log_history() -> None:
    history = [
        {"loss": 2.0, "learning_rate": 1e-5, "epoch": 0.5, "step": 5},
        {"eval_loss": 1.8, "epoch": 1.0, "step": 10},
        {"train_runtime": 3.0, "step": 10},
        {"loss": True, "step": 11},
    ]

    train, evals = points_from_log_history(history)

    assert train == [TrainPoint(5, 0.5, 2.0, 1e-5)]
    assert evals == [EvalPoint(10, 1.0, 1.8)]
