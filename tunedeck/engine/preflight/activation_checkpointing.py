"""Check 11: activation checkpointing gives the gradients the step gives without it.

The method checks activation checkpointing on its own before it is combined with gradient
accumulation: one step over one batch (no accumulation) with checkpointing on is compared with
the same step with it off, on the run's trainer. A run that does not checkpoint (false, or
"auto" that check 4 resolved off) has nothing to check; under FSDP checkpointing is FSDP's
own, which this one-process check does not reach.
"""

from __future__ import annotations

import math
from typing import Any

from tunedeck.engine.preflight.accumulation import accumulation_examples
from tunedeck.engine.preflight.context import PreflightContext, SkipCheck
from tunedeck.engine.preflight.gradients import relative_difference, step_gradients, tolerance_for
from tunedeck.engine.preflight.report import CheckResult

NUMBER = 11
EXAMPLES = 2


def check_activation_checkpointing(ctx: PreflightContext) -> CheckResult:
    """Compare one step's gradients with checkpointing on and off; fail past the tolerance."""
    from tunedeck.engine.training.training_data import ExampleDataset

    if not ctx.checkpointing_enabled:
        raise SkipCheck("not applicable: the run does not use activation checkpointing")
    if ctx.preference:
        raise SkipCheck("not applicable: checked on the supervised trainer only")
    ctx.require("loaded", "data", "precision")
    if not getattr(ctx.loaded.model, "supports_gradient_checkpointing", True):
        raise SkipCheck("not applicable: the model does not support activation checkpointing")
    size = max(EXAMPLES, ctx.smallest_micro_batch)
    dataset = ExampleDataset(accumulation_examples(ctx.data.train.features, size, ctx.options.numerics_tokens))
    plain = step_gradients(ctx, dataset, ctx.work_dir / "no-checkpointing", micro_batch=size, accumulation=1,
                           activation_checkpointing=False)  # fmt: skip
    checkpointed = step_gradients(ctx, dataset, ctx.work_dir / "checkpointing", micro_batch=size, accumulation=1,
                                  activation_checkpointing=True)  # fmt: skip
    difference = relative_difference(checkpointed.gradients, plain.gradients)
    tolerance = tolerance_for(ctx.precision)
    figures: dict[str, Any] = {
        "examples": size,
        "relative_difference": difference if math.isfinite(difference) else None,
        "tolerance": tolerance,
        "precision": str(ctx.precision),
    }
    shown = f"{difference:.2e}" if math.isfinite(difference) else "infinitely far (no reference gradient)"
    if not difference <= tolerance:
        return CheckResult(
            NUMBER,
            "fail",
            f"activation checkpointing changes the gradients: {shown} away from the step without it "
            f"(tolerance {tolerance:g})",
            figures,
            [
                "gradient_checkpointing: false, with a smaller batch_size and more gradient_accumulation_steps "
                "if memory requires it",
                "a model with its own recomputation must recompute the forward exactly (same dropout masks, "
                "same inputs); report it to the model's authors",
            ],
        )
    return CheckResult(
        NUMBER, "pass", f"checkpointing on matches off: relative difference {shown} (tolerance {tolerance:g})", figures
    )
