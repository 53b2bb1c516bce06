"""Check 10: gradient accumulation gives the gradients of one batch of the same examples.

The method checks accumulation on its own before it is combined with activation checkpointing.
One optimizer step of `k` micro-batches of one example each (k: the run's accumulation, at
least 2) is compared with one step over a single batch of the same `k` examples, both on the
run's trainer and so on its loss normalisation (`loss_normalisation`). The examples are cut to
a few hundred tokens, and example `i` keeps only the last (i+1)/k of its labelled tokens, so the
micro-batches hold different numbers of labelled tokens: the case where a per-micro-batch mean
and a per-token mean over the step disagree. Checkpointing is off in both steps.
"""

from __future__ import annotations

import math
from typing import Any

from tunedeck.engine.preflight.context import PreflightContext, SkipCheck
from tunedeck.engine.preflight.gradients import relative_difference, step_gradients, tolerance_for
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.engine.training.loss_normalisation import PER_TOKEN

NUMBER = 10
MOST_MICRO_BATCHES = 16  # the one-batch side holds them all at once
IGNORED = -100


def check_accumulation(ctx: PreflightContext) -> CheckResult:
    """Compare one accumulated step with one batch of the same examples; fail past the tolerance."""
    if ctx.preference:
        raise SkipCheck("not applicable: preference losses are averaged over the pairs of each micro-batch")
    ctx.require("loaded", "data", "precision")
    steps = min(max(2, ctx.accumulation), MOST_MICRO_BATCHES)
    examples = accumulation_examples(ctx.data.train.features, steps, ctx.options.numerics_tokens)
    from tunedeck.engine.training.training_data import ExampleDataset

    dataset = ExampleDataset(examples)
    accumulated = step_gradients(ctx, dataset, ctx.work_dir / "accumulated", micro_batch=1, accumulation=steps,
                                 activation_checkpointing=False)  # fmt: skip
    one_batch = step_gradients(ctx, dataset, ctx.work_dir / "one-batch", micro_batch=steps, accumulation=1,
                               activation_checkpointing=False)  # fmt: skip
    difference = relative_difference(accumulated.gradients, one_batch.gradients)
    tolerance = tolerance_for(ctx.precision)
    labelled = [labelled_tokens(example) for example in examples]
    figures: dict[str, Any] = {
        "micro_batches": steps,
        "configured_accumulation": ctx.accumulation,
        "labelled_tokens_per_micro_batch": labelled,
        "loss_normalisation": accumulated.normalisation,
        "relative_difference": difference if math.isfinite(difference) else None,
        "tolerance": tolerance,
        "precision": str(ctx.precision),
    }
    if not difference <= tolerance:
        return CheckResult(
            NUMBER,
            "fail",
            f"{steps} accumulated micro-batches give gradients {_shown(difference)} away from one batch of the "
            f"same examples (tolerance {tolerance:g}); the loss is normalised {accumulated.normalisation}",
            figures,
            [
                "the accumulated loss must weigh every labelled token of the step as one batch does: "
                "divide the summed loss by the labelled tokens of all micro-batches of the step",
                "a custom loss or model must accept the step's token count (num_items_in_batch)",
                "gradient_accumulation_steps: 1 with a larger batch_size avoids accumulation if memory allows",
            ],
        )
    message = f"{steps} accumulated micro-batches match one batch: relative difference {_shown(difference)} "
    message += f"(tolerance {tolerance:g}); the loss is normalised {accumulated.normalisation}"
    if accumulated.normalisation == PER_TOKEN and len(set(labelled)) == 1:
        message += "; the micro-batches hold equal labelled tokens, so the normalisations could not differ here"
    return CheckResult(NUMBER, "pass", message, figures)


def accumulation_examples(features: list[dict[str, Any]], count: int, tokens: int) -> list[dict[str, Any]]:
    """`count` examples with the most labelled tokens, cut to their last `tokens`, labels thinned by rank.

    Example `i` keeps the last ceil(n·(i+1)/count) of its n labelled tokens (at least one), so the
    micro-batches of one example each hold different numbers of labelled tokens.
    """
    ranked = sorted(features, key=labelled_tokens, reverse=True)
    chosen = (ranked * math.ceil(count / max(1, len(ranked))))[:count]
    return [_thinned(_cut(example, tokens), index, count) for index, example in enumerate(chosen)]


def labelled_tokens(example: dict[str, Any]) -> int:
    """The tokens an example's loss counts: its labels other than the ignored ones (1 for a class label)."""
    labels = example.get("labels")
    if not isinstance(labels, list):
        return 1
    return sum(1 for label in labels if label != IGNORED)


def _cut(example: dict[str, Any], tokens: int) -> dict[str, Any]:
    """The example's last `tokens` tokens (answers sit at the end); packed rows keep their positions as they are."""
    if "position_ids" in example or len(example["input_ids"]) <= tokens:
        return dict(example)
    length = len(example["input_ids"])
    return {
        key: value[-tokens:] if isinstance(value, list) and len(value) == length else value
        for key, value in example.items()
    }


def _thinned(example: dict[str, Any], index: int, count: int) -> dict[str, Any]:
    labels = example.get("labels")
    if not isinstance(labels, list):
        return example
    positions = [at for at, label in enumerate(labels) if label != IGNORED]
    keep = max(1, math.ceil(len(positions) * (index + 1) / count))
    dropped = set(positions[: len(positions) - keep])
    return {**example, "labels": [IGNORED if at in dropped else label for at, label in enumerate(labels)]}


def _shown(difference: float) -> str:
    return f"{difference:.2e}" if math.isfinite(difference) else "infinitely far (no reference gradient)"
