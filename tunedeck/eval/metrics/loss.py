"""Evaluation loss and perplexity, the two metrics every task reports."""

from __future__ import annotations

import math

from tunedeck.eval.metrics.inputs import MetricInputError

# Perplexity is exp(loss). Above this loss (in nats) it is reported as exp(cap):
# math.exp overflows near 709.8 and JSON has no infinity, while a model that is no
# better than uniform over a one-million-token vocabulary only reaches ln(1e6) ≈ 13.8.
# A loss beyond 100 is a broken run, and a finite capped number keeps the
# results file valid JSON and the ordering monotonic below the cap.
MAX_LOSS_FOR_PERPLEXITY = 100.0


def perplexity(mean_loss: float) -> float:
    """exp(mean_loss), with the loss capped at `MAX_LOSS_FOR_PERPLEXITY` nats; NaN stays NaN.

    The loss must be the mean per-token cross-entropy in nats (what the trainer
    reports); a per-sequence mean would give a meaningless perplexity.
    """
    if math.isnan(mean_loss):
        return math.nan
    if mean_loss < 0:
        raise MetricInputError(f"eval loss must be >= 0 (a cross-entropy), found {mean_loss}")
    return math.exp(min(mean_loss, MAX_LOSS_FOR_PERPLEXITY))


def loss_metrics(mean_loss: float) -> dict[str, float]:
    """`{"eval_loss": mean_loss, "eval_perplexity": perplexity(mean_loss)}`.

    A NaN loss is passed through as NaN in both keys rather than raised: the run
    must still record that its evaluation diverged, and guards treat NaN as a
    violation.
    """
    return {"eval_loss": float(mean_loss), "eval_perplexity": perplexity(float(mean_loss))}
