"""Whether a finished job stopped early, and the plain sentence that says so.

The engine's result event of a run records `stopped_early`, the step it stopped at
(`global_step`) and the steps it had planned (`total_steps`); the job's config names the
metric that did not improve and the patience. A run that stopped early is complete: it
trained every step it was going to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_METRIC = "eval_loss"


@dataclass(frozen=True)
class EarlyStop:
    """Where a run stopped before its planned end, and the rule that stopped it."""

    step: int
    total_steps: int | None
    metric: str
    patience: int | None

    def describe(self) -> str:
        """'stopped early at step 120 of 150 (no improvement in eval_loss for 3 evaluations)'."""
        of_total = f" of {self.total_steps}" if self.total_steps else ""
        text = f"stopped early at step {self.step}{of_total}"
        if self.patience is None:
            return f"{text} (no improvement in {self.metric})"
        evaluations = "evaluation" if self.patience == 1 else "evaluations"
        return f"{text} (no improvement in {self.metric} for {self.patience} {evaluations})"


def evaluated_metric(name: str) -> str:
    """The metric as evaluations and checkpoints record it: `loss` in a config is `eval_loss` there."""
    return name if name.startswith("eval_") else f"eval_{name}"


def early_stop_from(result: Mapping[str, Any], config: Mapping[str, Any] | None) -> EarlyStop | None:
    """The early stop a run's result event records, with the config's metric and patience; None if it ran on."""
    step = result.get("global_step")
    if result.get("stopped_early") is not True or not isinstance(step, int) or isinstance(step, bool):
        return None
    total = result.get("total_steps")
    config = config or {}
    metric = str(config.get("metric_for_best_model") or DEFAULT_METRIC)
    patience = config.get("early_stopping_patience")
    return EarlyStop(
        step=step,
        total_steps=total if isinstance(total, int) and total > 0 else None,
        metric=evaluated_metric(metric),
        patience=patience if isinstance(patience, int) and not isinstance(patience, bool) else None,
    )
