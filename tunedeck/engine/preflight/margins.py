"""Check 8: margins in time and disk, from the measured step time and checkpoint size.

The whole run's duration is projected from the sustained step time (check 7) and the
evaluation passes: those the config asks for during training, and the baseline and final
evaluations of the experiment method, timed on a few rows in check 7. The disk it needs (checkpoints
kept, the final model, event logs, the two evaluation files) is compared with what is
free where the run will write.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tunedeck.config.config_warnings import schedule_warnings
from tunedeck.config.derived import derive_values, schedule_refusals
from tunedeck.engine.preflight.context import PreflightContext, trial_config
from tunedeck.engine.preflight.disk import (
    checkpoint_count,
    checkpoint_estimate,
    estimate_parameters,
    free_disk_bytes,
    weights_bytes,
)
from tunedeck.engine.preflight.eval_cost import EvalCost
from tunedeck.engine.preflight.report import CheckResult

if TYPE_CHECKING:
    from tunedeck.config.derived import DerivedValues
    from tunedeck.config.training import TrainingConfig

EVENT_LINE_BYTES = 400  # a metric event line with its figures, rounded up
EVAL_ROW_BYTES = 2048  # one example in an evaluation file (prompt, answer, prediction, scores) when not measured
BASELINE_FINAL_PASSES = 2  # the untrained model before training and the trained one after it
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
    evaluation = evaluation_margins(
        validation_rows,
        evaluations,
        step_s,
        derived.effective_batch_size,
        ctx.eval_cost,
        baseline_rows=_validation_examples(ctx, validation_rows),
    )
    eval_s = evaluation.seconds
    saves = checkpoint_count(config, derived.total_steps)
    checkpoint_bytes, final_bytes = _checkpoint_sizes(ctx)
    kept = saves if ctx.options.kept_checkpoints is None else min(saves, ctx.options.kept_checkpoints)
    log_bytes = EVENT_LINE_BYTES * (math.ceil(derived.total_steps / config.logging_steps) + evaluations + saves)
    needed = kept * checkpoint_bytes + final_bytes + log_bytes + evaluation.file_bytes
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
        "evaluation": evaluation.to_dict(),
        "eval_file_bytes": evaluation.file_bytes,
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
    refused = _refusal(ctx, config, derived, summary, figures, needed=needed, free=free, total_s=total_s)
    if refused is not None:
        return refused
    warnings, advice = _margin_warnings(
        ctx, config, derived, needed=needed, free=free, total_s=total_s,
        between_saves_s=between_saves_s, validation_rows=validation_rows,
    )
    if warnings:
        return CheckResult(8, "warn", summary + "; " + "; ".join(warnings), figures, advice)
    return CheckResult(8, "pass", summary, figures)


def _checkpoint_sizes(ctx: PreflightContext) -> tuple[int, int]:
    """The bytes of one checkpoint and of the final model: measured by an earlier check, else estimated
    from the weights' size."""
    checkpoint_bytes = ctx.checkpoint_bytes
    final_bytes = ctx.final_bytes
    if checkpoint_bytes is None or final_bytes is None:
        estimate = checkpoint_estimate(ctx, estimate_parameters(weights_bytes(ctx.resolved.path)))
        checkpoint_bytes = checkpoint_bytes or estimate["checkpoint_bytes"]
        final_bytes = final_bytes or estimate["final_bytes"]
    return checkpoint_bytes, final_bytes


def _refusal(
    ctx: PreflightContext,
    config: TrainingConfig,
    derived: DerivedValues,
    summary: str,
    figures: dict[str, Any],
    *,
    needed: int,
    free: int,
    total_s: float,
) -> CheckResult | None:
    """The failed check when the schedule never updates the weights, the disk is too small or the time
    budget too short (in that order); None when the run fits."""
    refusals = schedule_refusals(config, derived)
    if refusals:
        # The run would end "succeeded" with its starting weights: refused here, before any time is spent.
        return CheckResult(
            8,
            "fail",
            summary + ": " + "; ".join(issue.message for issue in refusals),
            figures,
            [f"{issue.field}: {issue.expected}" for issue in refusals],
        )
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
    return None


def _margin_warnings(
    ctx: PreflightContext,
    config: TrainingConfig,
    derived: DerivedValues,
    *,
    needed: int,
    free: int,
    total_s: float,
    between_saves_s: float,
    validation_rows: int,
) -> tuple[list[str], list[str]]:
    """The warnings of a run that fits (disk share, unmeasured evaluation, schedule, interruption loss),
    with the advice that goes with them."""
    warnings = []
    if needed > free * ctx.options.disk_warn_share:
        warnings.append(f"checkpoints would fill {needed / free:.0%} of the free disk")
    if validation_rows and ctx.eval_cost is None and "eval_cost" in ctx.problems:
        warnings.append(f"the baseline evaluation could not be measured ({ctx.problems['eval_cost']})")
    schedule = schedule_warnings(config, derived)
    warnings += [warning.message for warning in schedule]
    advice = [f"{warning.field}: {warning.expected}" for warning in schedule]
    if config.save_strategy == "no" and total_s > INTERRUPTION_WARN_S:
        warnings.append("no checkpoints: an interruption loses the whole run")
        advice.append('save_strategy "steps" or "epoch", so that an interruption can resume')
    elif config.save_strategy != "no" and between_saves_s > INTERRUPTION_WARN_S:
        warnings.append(f"an interruption loses up to {_duration(between_saves_s)} (time between checkpoints)")
        advice.append("lower save_steps so a resume loses less work")
    return warnings, advice


@dataclass(frozen=True)
class EvaluationMargins:
    """Time and disk the run's evaluations take: during training, and the baseline and final passes."""

    validation_rows: int
    trainer_evaluations: int  # eval_loss passes: during training and the final one
    trainer_seconds: float
    baseline_final_passes: int  # the experiment method's procedure, before and after training
    baseline_final_seconds: float
    file_bytes: int  # baseline_eval.json + final_eval.json
    measured: bool  # baseline cost measured on this hardware (else estimated from the step time)

    @property
    def seconds(self) -> float:
        """Every evaluation's time."""
        return self.trainer_seconds + self.baseline_final_seconds

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            **asdict(self),
            "trainer_seconds": round(self.trainer_seconds, 3),
            "baseline_final_seconds": round(self.baseline_final_seconds, 3),
        }


def evaluation_margins(
    validation_rows: int,
    trainer_evaluations: int,
    step_s: float,
    effective_batch: int,
    cost: EvalCost | None,
    *,
    baseline_rows: int | None = None,
) -> EvaluationMargins:
    """The evaluations' time and disk for `validation_rows` rows (`baseline_rows` examples, when packed).

    The trainer's eval_loss passes cost a forward pass per row (a share of the measured
    step). The baseline and final passes run the evaluation procedure, which for chat data
    decodes answers: their cost per row and file size per row are the measured `cost`;
    without a measurement they fall back on the forward estimate and `EVAL_ROW_BYTES`.
    """
    examples = validation_rows if baseline_rows is None else baseline_rows
    forward_s = step_s / max(1, effective_batch) * FORWARD_SHARE_OF_STEP
    passes = BASELINE_FINAL_PASSES if examples else 0
    if cost is not None:
        per_row_s, file_bytes = cost.seconds_per_row, cost.fixed_bytes + examples * cost.bytes_per_row
    else:
        per_row_s, file_bytes = forward_s, examples * EVAL_ROW_BYTES
    return EvaluationMargins(
        validation_rows=examples,
        trainer_evaluations=trainer_evaluations,
        trainer_seconds=trainer_evaluations * validation_rows * forward_s,
        baseline_final_passes=passes,
        baseline_final_seconds=passes * examples * per_row_s,
        file_bytes=math.ceil(passes * file_bytes),
        measured=cost is not None,
    )


def _validation_examples(ctx: PreflightContext, validation_rows: int) -> int:
    """Rows of the validation file (the evaluation procedure's unit; packing regroups the trainer's)."""
    for manifest in ctx.data.manifests or ():
        if isinstance(manifest, dict) and manifest.get("role") == "validation" and "rows" in manifest:
            return int(manifest["rows"])
    return validation_rows


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
