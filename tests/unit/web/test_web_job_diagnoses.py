"""The job page's diagnoses: the quality warnings get their titles, and the step their figures name."""

from __future__ import annotations

import pytest

from tunedeck.web.job_view import diagnosis_from


@pytest.mark.parametrize(
    ("kind", "title"),
    [
        ("loss_rising", "The training loss is rising"),
        ("loss_plateau", "The training loss stopped falling early"),
        ("overfitting", "Overfitting: the validation loss rises while the training loss falls"),
        ("guard_regression", "The final model is worse than the baseline on a guarded metric"),
        ("no_update", "Training never updated the weights"),
    ],
)
def test_a_quality_diagnosis_shows_its_title_advice_and_step(kind: str, title: str) -> None:
    shown = diagnosis_from(
        {"kind": kind, "message": "what the traces show", "advice": ["Do this."], "figures": {"step": 80}}
    )
    assert (shown.title, shown.message, shown.advice, shown.step) == (title, "what the traces show", ["Do this."], 80)


def test_a_diagnosis_without_its_own_advice_gets_the_generic_one() -> None:
    shown = diagnosis_from({"kind": "overfitting", "message": "m"})
    assert shown.step is None
    assert any("fewer epochs" in line for line in shown.advice)
