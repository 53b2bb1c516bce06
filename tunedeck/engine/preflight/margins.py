"""Check 8: margins in time and disk, from the measured step time and checkpoint size.

The whole run's duration is projected from the sustained step time (check 7) and the
evaluation passes the config asks for; the disk it needs (checkpoints kept, the final
model, event logs) is compared with what is free where the run will write.
"""

from __future__ import annotations

import math
from typing import Any

from tunedeck.config.derived import derive_values
from tunedeck.engine.preflight.context import PreflightContext, trial_config
from tunedeck.engine.preflight.disk import (
    checkpoint_count,
    checkpoint_estimate,
    estimate_parameters,
    free_disk_bytes,
    weights_bytes,
)
from tunedeck.engine.preflight.report import CheckResult

EVENT_LINE_BYTES = 400  # a metric event line with its figures, rounded up
FORWARD_SHARE_OF_STEP = 1 / 3  # a forward pass costs about a third of forward + backward + update
INTERRUPTION_WARN_S = 3600.0  # more than this between checkpoints: an interruption loses too much


def check_margins(ctx: PreflightContext) -> CheckResult:
    """Project the run's duration and disk needs, and compare them with the budget and free disk."""
    ctx.require("data")
    if ctx.step_seconds is None:
        ctx.require("loaded")  # explains why no step time was measured
    config = trial_config(ctx.config, batch_size=ctx.micro_batch, gradient_accumulation_steps=ctx.accumulation)
    train_rows = len(ctx.data.train)
    validation_rows = len(ctx.data.validation) if ctx.data.validation is not None else 0
    derived = derive_values(config, train_rows, ctx.spec.processes)
    step_s = float(ctx.step_seconds or 0.0)
    training_s = derived.total_steps * step_s
    evaluations = evaluation_count(ctx, derived.total_steps) if validation_rows else 0
    seconds_per_example = step_s / max(1, derived.effective_batch_size)
    eval_s = evaluations * validation_rows * seconds_per_example * FORWARD_SHARE_OF_STEP
    saves = checkpoint_count(config, derived.total_steps)
    checkpoint_bytes = ctx.checkpoint_bytes
    final_bytes = ctx.final_bytes
    if checkpoint_bytes is None or final_bytes is None:
        estimate = checkpoint_estimate(ctx, estimate_parameters(weights_bytes(ctx.resolved.path)))
        checkpoint_bytes = checkpoint_bytes or estimate["checkpoint_bytes"]
        final_bytes = final_bytes or estimate["final_bytes"]
    kept = saves if ctx.options.kept_checkpoints is None else min(saves, ctx.options.kept_checkpoints)
    log_bytes = EVENT_LINE_BYTES * (math.ceil(derived.total_steps / config.logging_steps) + evaluations + saves)
    needed = kept * checkpoint_bytes + final_bytes + log_bytes
    free = free_disk_bytes(ctx.spec.out_dir)
    between_saves_s = (
        config.save_steps * step_s if config.save_strategy == "steps" else derived.steps_per_epoch * step_s
    )
    figures: dict[str, Any] = {
        "total_steps": derived.total_steps,
        "effective_batch_size": derived.effective_batch_size,
        "sustained_step_seconds": round(step_s, 4),
        "projected_training_seconds": round(training_s, 3),
        "evaluations": evaluations,
        "projected_eval_seconds": round(eval_s, 3),
        "projected_total_seconds": round(training_s + eval_s, 3),
        "checkpoints_saved": saves,
        "checkpoints_kept": kept,
        "checkpoint_bytes": checkpoint_bytes,
        "final_bytes": final_bytes,
        "log_bytes": log_bytes,
        "disk_needed_bytes": needed,
        "disk_free_bytes": free,
        "seconds_between_checkpoints": round(between_saves_s, 1) if config.save_strategy != "no" else None,
        "time_budget_seconds": ctx.options.time_budget_s,
    }
    total_s = training_s + eval_s
    summary = f"about {_duration(total_s)} for {derived.total_steps} steps; disk {_gb(needed)} of {_gb(free)} free"
    if needed > free:
        return CheckResult(
            8,
            "fail",
            summary + ": not enough disk",
            figures,
            ["free disk space, raise save_steps, or keep fewer checkpoints"],
        )
    budget = ctx.options.time_budget_s
    if budget is not None and total_s > budget:
        return CheckResult(
            8,
            "fail",
            summary + f": over the time budget of {_duration(budget)}",
            figures,
            ["train fewer epochs, or shorten max_length, or use a faster GPU"],
        )
    warnings = []
    if needed > free * ctx.options.disk_warn_share:
        warnings.append(f"checkpoints would fill {needed / free:.0%} of the free disk")
    if config.save_strategy == "no" and total_s > INTERRUPTION_WARN_S:
        warnings.append("no checkpoints: an interruption loses the whole run")
    elif config.save_strategy != "no" and between_saves_s > INTERRUPTION_WARN_S:
        warnings.append(f"an interruption loses up to {_duration(between_saves_s)} (time between checkpoints)")
    if warnings:
        return CheckResult(
            8, "warn", summary + "; " + "; ".join(warnings), figures, ["lower save_steps so a resume loses less work"]
        )
    return CheckResult(8, "pass", summary, figures)


def evaluation_count(ctx: PreflightContext, total_steps: int) -> int:
    """Evaluations during the run plus the final one."""
    config = ctx.config
    if config.eval_strategy == "steps":
        return total_steps // config.eval_steps + 1
    if config.eval_strategy == "epoch":
        return config.epochs + 1
    return 1


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _gb(value: float) -> str:
    return f"{value / 1e9:.2f} GB"
