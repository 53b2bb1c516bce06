"""Check 5: overfit a tiny sample; the loss must fall by a set share, or labels, template or optimizer are broken.

A handful of training examples is trained on for tens of steps at a constant learning rate
with the run's trainer. A model that cannot memorise 8 examples will not learn from 80,000.

The rate is the config's, raised to a memorising floor (1e-3 for adapters, 1e-4 for every
weight) when it is lower: the check looks for broken labels, templates or optimizer
wiring, and a schedule tuned for thousands of steps would fail it for no fault.
"""

from __future__ import annotations

import statistics

from tunedeck.engine.preflight.context import PreflightContext
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.engine.training.diagnosis import DiagnosedError

OVERFIT_RATE_FLOOR_PEFT = 1e-3
OVERFIT_RATE_FLOOR_FULL = 1e-4


def check_overfit(ctx: PreflightContext) -> CheckResult:
    """Train on a few examples and require the loss to fall by `overfit_min_drop`."""
    from tunedeck.engine.training.training_data import ExampleDataset

    ctx.require("loaded", "data", "precision")
    options = ctx.options
    sample = ExampleDataset(list(ctx.data.train.features[: options.overfit_examples]))
    micro = min(ctx.micro_batch, len(sample))
    floor = OVERFIT_RATE_FLOOR_PEFT if ctx.config.use_peft else OVERFIT_RATE_FLOOR_FULL
    rate = options.overfit_learning_rate or max(ctx.config.learning_rate, floor)
    trainer = ctx.trial_trainer(
        sample,
        ctx.work_dir / "overfit",
        micro_batch=micro,
        accumulation=1,
        max_steps=options.overfit_steps,
        learning_rate=rate,
    )
    try:
        trainer.train()
    except DiagnosedError as error:
        return CheckResult(5, "fail", error.diagnosis.message, error.diagnosis.figures, error.diagnosis.advice)
    finally:
        trainer.optimizer = None
    losses = [float(entry["loss"]) for entry in trainer.state.log_history if "loss" in entry]
    figures = {
        "examples": len(sample),
        "micro_batch": micro,
        "steps": len(losses),
        "learning_rate": rate,
        "min_drop": options.overfit_min_drop,
        "losses": [round(loss, 4) for loss in losses],
    }
    if len(losses) < 2:
        return CheckResult(5, "fail", "too few steps logged to judge the loss", figures)
    first = losses[0]
    tail = statistics.fmean(losses[-3:])
    drop = (first - tail) / first if first > 0 else 0.0
    figures.update(first_loss=round(first, 4), last_loss=round(tail, 4), drop=round(drop, 4))
    if drop >= options.overfit_min_drop:
        return CheckResult(5, "pass", f"loss fell by {drop:.0%} ({first:.3f} → {tail:.3f})", figures)
    return CheckResult(
        5,
        "fail",
        f"loss fell by only {drop:.0%} ({first:.3f} → {tail:.3f}); at least {options.overfit_min_drop:.0%} expected",
        figures,
        [
            "check the labels and the loss mask (check 3)",
            "check the chat template the data is rendered with",
            f"check the optimizer settings: learning_rate {rate:g} may be too low for {len(losses)} steps",
        ],
    )
