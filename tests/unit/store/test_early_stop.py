"""A run's early stop, read from its result event and its config, and the sentence that states it."""

from __future__ import annotations

from tunedeck.store.early_stop import EarlyStop, early_stop_from


def test_a_result_that_stopped_early_is_stated_with_the_metric_and_patience() -> None:
    stop = early_stop_from(
        {"stopped_early": True, "global_step": 120, "total_steps": 150},
        {"metric_for_best_model": "loss", "early_stopping_patience": 3},
    )
    assert stop == EarlyStop(step=120, total_steps=150, metric="eval_loss", patience=3)
    assert stop.describe() == "stopped early at step 120 of 150 (no improvement in eval_loss for 3 evaluations)"
    one = EarlyStop(step=2, total_steps=None, metric="eval_accuracy", patience=1)
    assert one.describe() == "stopped early at step 2 (no improvement in eval_accuracy for 1 evaluation)"


def test_a_run_that_went_on_or_an_unreadable_result_is_no_early_stop() -> None:
    assert early_stop_from({"stopped_early": False, "global_step": 150, "total_steps": 150}, {}) is None
    assert early_stop_from({"stopped_early": True, "global_step": "120"}, {}) is None
    assert early_stop_from({}, None) is None
