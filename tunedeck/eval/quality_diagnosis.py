"""Quality diagnoses read from a run's metric traces: a rising or early-flat training loss, overfitting,
a final model worse than the baseline on a guarded metric, and a run that never updated its weights.

Every check is a pure function on plain points (`TrainPoint`: step, epoch, loss, learning rate as
logged; `EvalPoint`: step, epoch, validation loss), so it runs the same on a live run, on a
finished run's events, and in tests, with no model and no torch.

What each finding means for the run:

- `loss_rising`, `loss_plateau`, `overfitting` and `guard_regression` are warnings about quality.
  The run still succeeds and its model is kept (it may be the best this data allows, and the
  best checkpoint may predate the problem); the diagnosis travels with the job so nobody ships
  it unread.
- `no_update` is a failure: a run that made no optimizer step, or made every step at learning
  rate 0, returns its starting model unchanged, and reporting that as success would pass the
  untrained model off as a trained one.

The thresholds are deliberately conservative (a change must clear both a share of the loss and
an absolute margin, and last over a window of logged points) so that the noise of a healthy run
triggers nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.config.training import TrainingConfig
from tunedeck.core.diagnosis import Diagnosis, rounded_rate
from tunedeck.eval.guards import FLOAT_NOISE, GuardResult
from tunedeck.eval.metrics.paths import resolve_metric

# Smoothing: a trailing mean over a tenth of the logged points, never fewer than this many.
MIN_WINDOW = 5
# A sustained rise: the smoothed loss ends this share (and RISE_MIN_ABS) above its lowest value,
# and every smoothed point of the last window stays above that bar.
RISE_SHARE = 0.10
RISE_MIN_ABS = 0.02
# An early plateau: over the first third of training after warmup, the loss fell by less than this share.
PLATEAU_SHARE = 0.02
PLATEAU_MIN_POINTS = 6
# Overfitting: every validation loss after its lowest stays this share (and OVERFIT_MIN_ABS) above it.
OVERFIT_SHARE = 0.02
OVERFIT_MIN_ABS = 0.01


@dataclass(frozen=True)
class TrainPoint:
    """One logged training point: optimizer step, epoch (fractional), mean loss, learning rate as logged."""

    step: int
    epoch: float | None
    loss: float
    learning_rate: float | None = None


@dataclass(frozen=True)
class EvalPoint:
    """One evaluation on the validation data during training."""

    step: int
    epoch: float | None
    loss: float


def points_from_log_history(
    history: Sequence[Mapping[str, Any]],
) -> tuple[list[TrainPoint], list[EvalPoint]]:
    """Training and evaluation points from a trainer's log history (or metric/eval events, same keys)."""
    train: list[TrainPoint] = []
    evals: list[EvalPoint] = []
    for entry in history:
        step, epoch = entry.get("step"), _number(entry.get("epoch"))
        if not isinstance(step, int):
            continue
        loss = _number(entry.get("loss"))
        if loss is not None:
            train.append(TrainPoint(step, epoch, loss, _number(entry.get("learning_rate"))))
        eval_loss = _number(entry.get("eval_loss"))
        if eval_loss is not None:
            evals.append(EvalPoint(step, epoch, eval_loss))
    return train, evals


def smoothed_losses(points: Sequence[TrainPoint], window: int) -> list[float]:
    """Trailing means of `window` consecutive losses (one value per point from the `window`-th on)."""
    losses = [point.loss for point in points]
    return [sum(losses[end - window + 1 : end + 1]) / window for end in range(window - 1, len(losses))]


def smoothing_window(count: int) -> int:
    """The smoothing window for `count` logged points: a tenth of them, at least MIN_WINDOW."""
    return max(MIN_WINDOW, count // 10)


def rising_loss_diagnosis(points: Sequence[TrainPoint], config: TrainingConfig) -> Diagnosis | None:
    """`loss_rising` when the smoothed training loss climbed clearly above its lowest value and stayed there.

    Needs at least three windows of logged points; a single spike is smoothed away, and a rise
    must last the whole last window to count.
    """
    finite = [point for point in points if math.isfinite(point.loss)]
    window = smoothing_window(len(finite))
    smooth = smoothed_losses(finite, window)
    if len(smooth) < 2 * window:
        return None
    lowest_index = min(range(len(smooth)), key=smooth.__getitem__)
    lowest = smooth[lowest_index]
    bar = lowest + max(RISE_SHARE * abs(lowest), RISE_MIN_ABS)
    if lowest_index >= len(smooth) - window or not all(value > bar for value in smooth[-window:]):
        return None
    at = finite[lowest_index + window - 1]
    last = smooth[-1]
    lower = rounded_rate(config.learning_rate / 5)
    return Diagnosis(
        kind="loss_rising",
        message=(
            f"the training loss rose after step {at.step}{_epoch_text(at.epoch)}: smoothed over {window} logged "
            f"points it went from its lowest {lowest:.4g} to {last:.4g}"
            + (f" ({(last - lowest) / abs(lowest):+.0%})" if lowest else "")
        ),
        advice=[
            f"Lower the learning rate (this run uses {config.learning_rate:g}; try {lower:g}).",
            f"Warm up for longer (warmup_ratio now {config.warmup_ratio:g}) so the first updates are gentler.",
            "Check the data: a rise partway through often comes from a block of malformed, mislabelled or "
            "differently formatted examples.",
            f"Train for fewer epochs (now {config.epochs}), or keep the checkpoint from before the rise.",
        ],
        figures={
            "step": at.step,
            "epoch": at.epoch,
            "lowest_smoothed_loss": lowest,
            "last_smoothed_loss": last,
            "window": window,
            "learning_rate": config.learning_rate,
        },
    )


def early_plateau_diagnosis(
    points: Sequence[TrainPoint], config: TrainingConfig, warmup_steps: int = 0
) -> Diagnosis | None:
    """`loss_plateau` when the loss did not meaningfully fall over the first third of training after warmup.

    The warmup is left out (a low learning rate there is the plan, not a plateau). The mean of
    the first quarter of that early part is compared with the mean of its last quarter.
    """
    finite = [point for point in points if math.isfinite(point.loss)]
    if not finite:
        return None
    last_step = finite[-1].step
    early_end = warmup_steps + (last_step - warmup_steps) / 3
    early = [point for point in finite if warmup_steps < point.step <= early_end]
    if len(early) < PLATEAU_MIN_POINTS:
        return None
    quarter = max(2, len(early) // 4)
    start = sum(point.loss for point in early[:quarter]) / quarter
    end = sum(point.loss for point in early[-quarter:]) / quarter
    if start <= FLOAT_NOISE or (start - end) / start >= PLATEAU_SHARE:
        return None
    overall_end = sum(point.loss for point in finite[-quarter:]) / quarter
    adapter = " LoRA usually needs a higher rate than full fine-tuning (1e-4 to 2e-4)." if config.use_peft else ""
    return Diagnosis(
        kind="loss_plateau",
        message=(
            f"the training loss did not fall over the first third of training (steps {early[0].step} to "
            f"{early[-1].step}): {start:.4g} at the start, {end:.4g} at the end ({(end - start) / start:+.1%}); "
            f"{overall_end:.4g} at the end of training"
        ),
        advice=[
            f"The learning rate may be too low (this run uses {config.learning_rate:g}).{adapter}",
            "Check the data: answers that truncation removes or that are masked out leave nothing to learn "
            "(read the data report's counts of examples with no trained token).",
            "Compare with the baseline evaluation: a model that already does this task well has little left to learn.",
            f"Check max_length (now {config.max_length}) against the length of your examples.",
        ],
        figures={
            "step": early[-1].step,
            "early_start_loss": start,
            "early_end_loss": end,
            "final_loss": overall_end,
            "warmup_steps": warmup_steps,
            "learning_rate": config.learning_rate,
        },
    )


def overfitting_diagnosis(
    train: Sequence[TrainPoint], evals: Sequence[EvalPoint], config: TrainingConfig
) -> Diagnosis | None:
    """`overfitting` when the validation loss rose after its lowest point while the training loss kept falling.

    Every evaluation after the lowest must stay clearly above it (a share and an absolute margin),
    and the training loss near the last evaluation must be below the training loss near the lowest one.
    """
    finite = sorted((point for point in evals if math.isfinite(point.loss)), key=lambda point: point.step)
    if len(finite) < 2 or not train:
        return None
    lowest_index = min(range(len(finite)), key=lambda index: finite[index].loss)
    lowest, later = finite[lowest_index], finite[lowest_index + 1 :]
    bar = lowest.loss + max(OVERFIT_SHARE * abs(lowest.loss), OVERFIT_MIN_ABS)
    if not later or not all(point.loss > bar for point in later):
        return None
    train_then, train_now = _train_loss_near(train, lowest.step), _train_loss_near(train, later[-1].step)
    if train_then is None or train_now is None or train_now >= train_then:
        return None
    final = later[-1]
    epochs_hint = math.ceil(lowest.epoch) if lowest.epoch else None
    return Diagnosis(
        kind="overfitting",
        message=(
            f"the validation loss has risen since step {lowest.step}{_epoch_text(lowest.epoch)}, its lowest "
            f"({lowest.loss:.4g}), to {final.loss:.4g} at step {final.step}, while the training loss kept falling "
            f"({train_then:.4g} to {train_now:.4g}): the model is memorising the training data"
        ),
        advice=[
            f"Train for fewer epochs (now {config.epochs}"
            + (f"; the validation loss was lowest in epoch {epochs_hint}" if epochs_hint else "")
            + "), or set early_stopping_patience with load_best_model_at_end: true to keep the best checkpoint.",
            "Add more training data, or more varied data.",
            f"Regularise more: weight_decay (now {config.weight_decay:g})"
            + (f", lora_dropout (now {config.lora_dropout:g})" if config.use_peft else "")
            + ".",
            f"Lower the learning rate (this run uses {config.learning_rate:g}).",
        ],
        figures={
            "step": lowest.step,
            "epoch": lowest.epoch,
            "lowest_eval_loss": lowest.loss,
            "final_eval_loss": final.loss,
            "final_eval_step": final.step,
            "train_loss_at_lowest": train_then,
            "train_loss_at_final": train_now,
        },
    )


def guard_regression_diagnoses(
    results: Sequence[GuardResult], baseline_metrics: Mapping[str, Any] | None
) -> list[Diagnosis]:
    """One `guard_regression` per guard the final model violates or whose metric it made worse than the baseline.

    A guard within its tolerance is still reported when the final value is worse than the
    baseline's: the guard says what is acceptable, the diagnosis says what was lost.
    """
    found: list[Diagnosis] = []
    for result in results:
        guard = result.guard
        baseline = result.baseline if result.baseline is not None else _baseline_value(baseline_metrics, guard.metric)
        worse = (
            result.value is not None
            and baseline is not None
            and (
                result.value < baseline - FLOAT_NOISE
                if guard.comparator == ">="
                else result.value > baseline + FLOAT_NOISE
            )
        )
        if result.passed and not worse:
            continue
        what = "violates the guard" if result.violated else "is worse than the baseline on the guarded metric of"
        found.append(
            Diagnosis(
                kind="guard_regression",
                message=(
                    f"the final model {what} `{guard}`: baseline {_show(baseline)}, final {_show(result.value)}"
                    + ("" if result.passed else f" ({result.reason})")
                ),
                advice=[
                    "Read the evaluation outputs for the examples that got worse (the job report lists the classes "
                    "and fields that degraded).",
                    "Lower the learning rate or train for fewer epochs: forgetting what the base model did well grows "
                    "with how far training moves it.",
                    "Add training examples of the behaviour the guard protects, so training keeps it.",
                    "Check the data: examples that contradict the guarded behaviour teach the model to lose it.",
                ],
                figures={
                    "guard": str(guard),
                    "metric": guard.metric,
                    "baseline": baseline,
                    "final": result.value,
                    "bound": result.bound,
                    "passed": result.passed,
                },
            )
        )
    return found


def no_update_diagnosis(
    points: Sequence[TrainPoint], optimizer_steps: int, config: TrainingConfig, *, warmup_steps: int = 0
) -> Diagnosis | None:
    """`no_update` when the run made no optimizer step, or every logged learning rate was 0.

    Such a run returns its starting weights unchanged: a failure, not a success.
    """
    rates = [point.learning_rate for point in points if point.learning_rate is not None]
    if optimizer_steps > 0 and (not rates or any(rate > 0 for rate in rates)):
        return None
    message = (
        "training made no optimizer step: the weights were never updated"
        if optimizer_steps <= 0
        else f"every logged learning rate of the {optimizer_steps} optimizer step(s) was 0: "
        "the weights were never updated"
    )
    return Diagnosis(
        kind="no_update",
        message=message,
        advice=[
            f"Give the run more optimizer steps: more data, more epochs (now {config.epochs}), or a smaller "
            f"effective batch (batch_size {config.batch_size} × gradient_accumulation_steps "
            f"{config.gradient_accumulation_steps} now).",
            f"Lower warmup_ratio (now {config.warmup_ratio:g}, {warmup_steps} warmup step(s)): the warmup starts "
            "at a learning rate of 0.",
            "Check the training data: a file with fewer usable rows than expected gives fewer steps.",
        ],
        figures={"optimizer_steps": optimizer_steps, "logged_learning_rates": rates[-5:], "warmup_steps": warmup_steps},
    )


def quality_diagnoses(
    train: Sequence[TrainPoint],
    evals: Sequence[EvalPoint],
    config: TrainingConfig,
    *,
    warmup_steps: int = 0,
) -> list[Diagnosis]:
    """Every quality warning the traces support, in a fixed order (rising, plateau, overfitting)."""
    found = [
        rising_loss_diagnosis(train, config),
        early_plateau_diagnosis(train, config, warmup_steps),
        overfitting_diagnosis(train, evals, config),
    ]
    return [diagnosis for diagnosis in found if diagnosis is not None]


def _train_loss_near(points: Sequence[TrainPoint], step: int) -> float | None:
    """The mean of the last few training losses logged at or before `step`."""
    before = [point.loss for point in points if point.step <= step and math.isfinite(point.loss)]
    if not before:
        return None
    recent = before[-MIN_WINDOW:]
    return sum(recent) / len(recent)


def _baseline_value(metrics: Mapping[str, Any] | None, path: str) -> float | None:
    if metrics is None:
        return None
    lookup = resolve_metric(metrics, path)
    value = lookup.value if lookup.found else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _epoch_text(epoch: float | None) -> str:
    return f" (epoch {epoch:.2f})" if epoch is not None else ""


def _show(value: float | None) -> str:
    return "unavailable" if value is None else f"{value:.6g}"
