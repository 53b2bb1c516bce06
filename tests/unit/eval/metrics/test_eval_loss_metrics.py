"""Evaluation loss and perplexity."""

from __future__ import annotations

import json
import math

import pytest

from tunedeck.eval.metrics import MAX_LOSS_FOR_PERPLEXITY, MetricInputError, loss_metrics


def test_perplexity_is_the_exponential_of_the_loss() -> None:
    assert loss_metrics(2.0) == {"eval_loss": 2.0, "eval_perplexity": pytest.approx(math.exp(2.0))}
    assert loss_metrics(0.0)["eval_perplexity"] == 1.0


def test_a_huge_loss_gives_a_finite_capped_perplexity() -> None:
    metrics = loss_metrics(5000.0)

    assert metrics["eval_perplexity"] == pytest.approx(math.exp(MAX_LOSS_FOR_PERPLEXITY))
    assert loss_metrics(math.inf)["eval_perplexity"] == metrics["eval_perplexity"]
    json.dumps(metrics, allow_nan=False)


def test_a_nan_loss_is_recorded_not_raised() -> None:
    metrics = loss_metrics(math.nan)
    assert math.isnan(metrics["eval_loss"]) and math.isnan(metrics["eval_perplexity"])


def test_a_negative_loss_is_refused() -> None:
    with pytest.raises(MetricInputError, match=">= 0"):
        loss_metrics(-0.1)
