"""Check 5: overfit a tiny sample; the loss must fall by a set share, or labels, template or optimizer are broken.

A handful of training examples is trained on for tens of steps at a constant learning rate
with the run's trainer. A model that cannot memorise 8 examples will not learn from 80,000.

The rate is the config's, raised to a memorising floor (1e-3 for adapters, 1e-4 for every
weight) when it is lower: the check looks for broken labels, templates or optimizer
wiring, and a schedule tuned for thousands of steps would fail it for no fault.

Preference tasks are judged on their own loss, with the same share, from the weights the
run starts from (check 4's steps are undone: the trained weights are set back to the
reference's). dpo starts where the model is its own reference: every margin is zero and
the loss is ln 2 ≈ 0.693, so a 30% fall (to about 0.49) means the model now ranks the
chosen answers of the sample above the rejected ones by a clear margin (β × margin ≈ 0.4).
kto starts at half its weights (0.5 with the default ones) for the same reason, and orpo's
loss is mostly the chosen answers' sft loss, which memorises as sft does; a reference-free
dpo starts wherever the model's own ranking puts it. The reward accuracy and margin the
trainer logs are reported beside the losses.
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
    if ctx.preference:
        from tunedeck.engine.preference.reference import rewind_to_reference

        # Check 4's steps moved the model from its reference: start again where the run starts.
        rewind_to_reference(ctx.loaded.model, ctx.preference_reference())
    sample = ExampleDataset(list(ctx.data.train.features[: options.overfit_examples]))
    micro = max(ctx.smallest_micro_batch, min(ctx.micro_batch, len(sample)))
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
    figures.update(_preference_figures(trainer.state.log_history))
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


_PREFERENCE_LOGS = {"rewards/accuracies": "reward_accuracy", "rewards/margins": "reward_margin"}


def _preference_figures(history: list[dict[str, float]]) -> dict[str, float]:
    """The first and last reward accuracy and margin a preference trainer logged (none for sft)."""
    figures: dict[str, float] = {}
    for logged, name in _PREFERENCE_LOGS.items():
        values = [float(entry[logged]) for entry in history if logged in entry and "loss" in entry]
        if values:
            figures[f"first_{name}"], figures[f"last_{name}"] = round(values[0], 4), round(values[-1], 4)
    return figures
