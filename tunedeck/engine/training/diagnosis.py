"""Built-in troubleshooting: a diagnosis with the troubleshooting advice for NaN loss, out-of-memory and slow training.

A `Diagnosis` becomes one `diagnosis` event (`kind`, `message`, `advice`, `figures`). The
advice is the job config contract's troubleshooting list, in English, filled in with the run's own
figures (its learning rate, precision, batch sizes and data counts) so it says what to
change and to what. `NanLossGuard` is the callback that stops a run whose logged loss is
not finite; `diagnose_failure` turns any exception a run ends with into a diagnosis.
"""

from __future__ import annotations

import math
from typing import Any

from transformers import TrainerCallback

from tunedeck.config.preference import smallest_micro_batch
from tunedeck.config.training import TrainingConfig, gradient_checkpointing_on
from tunedeck.core.diagnosis import Diagnosis, rounded_rate
from tunedeck.core.errors import TunedeckError
from tunedeck.engine.host.memory_fit import BatchSplit, split_effective_batch

_OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")


class DiagnosedError(TunedeckError):
    """Training stopped for a reason already diagnosed; `diagnosis` holds the advice."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        super().__init__(diagnosis.message)
        self.diagnosis = diagnosis


class NanLossError(DiagnosedError):
    """The training loss became NaN or infinite."""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether `error` is an accelerator or host out-of-memory error (CUDA, ROCm, MPS or CPU allocator)."""
    import torch

    if isinstance(error, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(error, RuntimeError) and any(marker in str(error).lower() for marker in _OOM_MARKERS)


def data_counts(reports: dict[str, Any]) -> dict[str, int]:
    """Counts from the training split's data report that point at empty or malformed examples."""
    train = reports.get("train") or {}
    return {
        key: int(train[key])
        for key in ("total", "no_answer", "lost_all_answer", "lost_part_of_answer", "truncated")
        if isinstance(train.get(key), int)
    }


def nan_loss_diagnosis(
    config: TrainingConfig,
    precision: str,
    *,
    step: int,
    loss: float,
    grad_norm: float | None = None,
    counts: dict[str, int] | None = None,
) -> Diagnosis:
    """The troubleshooting advice when the loss is NaN, with this run's learning rate, precision and data counts."""
    counts = counts or {}
    lower = rounded_rate(config.learning_rate / 5)
    advice = [
        f"Lower the learning rate (for example from 5e-5 to 1e-5; this run uses {config.learning_rate:g}, "
        f"try {lower:g}).",
        _precision_advice(precision),
        _data_advice(counts),
        "Enable gradient checkpointing to stabilise memory"
        + (" (already on in this run)." if gradient_checkpointing_on(config) else " (gradient_checkpointing: true)."),
    ]
    return Diagnosis(
        kind="nan_loss",
        message=f"the training loss is {'NaN' if math.isnan(loss) else 'infinite'} at step {step}",
        advice=advice,
        figures={
            "step": step,
            "loss": loss,
            "grad_norm": grad_norm,
            "learning_rate": config.learning_rate,
            "precision": precision,
            "gradient_checkpointing": gradient_checkpointing_on(config),
            "data": counts,
        },
    )


def smaller_split(effective: int, micro_batch: int, smallest: int) -> BatchSplit | None:
    """Half the micro-batch (or the nearest exact split below it), never below `smallest`; None when none."""
    if micro_batch // 2 < smallest:
        return None
    try:
        return split_effective_batch(effective, micro_batch // 2, exact_only=True, min_micro_batch=smallest)
    except ValueError:
        return None


def oom_diagnosis(
    config: TrainingConfig,
    precision: str,
    error: BaseException,
    *,
    micro_batch: int | None = None,
    accumulation: int | None = None,
    step: int | None = None,
    retry: dict[str, Any] | None = None,
) -> Diagnosis:
    """The troubleshooting advice on out-of-memory; `retry` describes the automatic retry when one follows."""
    micro = micro_batch or config.batch_size
    accum = accumulation or config.gradient_accumulation_steps
    effective = micro * accum
    smallest = smallest_micro_batch(config)
    split = smaller_split(effective, micro, smallest)
    if split is not None:
        batch_advice = (
            f"Reduce batch_size and compensate with gradient_accumulation_steps (this run: {micro} × {accum} = "
            f"{effective}; {split.micro_batch} × {split.accumulation} keeps it)."
        )
    elif smallest > 1:
        batch_advice = (
            f"batch_size cannot go below {micro} here: kto pairs each prompt with another completion of the same "
            f"micro-batch for its KL term, so it needs at least {smallest}."
        )
    elif config.packing is True:
        batch_advice = (
            "batch_size does not lower the peak here: whole-dataset packing already trains one packed row per "
            f"micro-batch, and max_length ({config.max_length}) sets the row's tokens."
        )
    else:
        batch_advice = "Reduce batch_size and compensate with gradient_accumulation_steps (already at batch_size 1)."
    peft_advice = {
        "full": "Enable LoRA or QLoRA (this run fine-tunes every weight).",
        "lora": (
            "Enable LoRA or QLoRA (this run uses LoRA; QLoRA keeps the base in 4 bits where bitsandbytes' kernels run)."
        ),
        "qlora": "Enable LoRA or QLoRA (this run already uses QLoRA).",
    }[config.peft_method if config.use_peft else "full"]
    advice = [
        batch_advice,
        f"Reduce max_length (now {config.max_length}).",
        peft_advice,
        "Enable gradient checkpointing (gradient_checkpointing: true)."
        if not gradient_checkpointing_on(config)
        else "Enable gradient checkpointing (already on in this run).",
        "Use mixed precision if you are training in fp32."
        + (" This run trains in fp32." if precision == "fp32" else f" This run already uses {precision}."),
    ]
    figures: dict[str, Any] = {
        "micro_batch": micro,
        "gradient_accumulation_steps": accum,
        "effective_batch": effective,
        "max_length": config.max_length,
        "precision": precision,
        "use_peft": config.use_peft,
        "gradient_checkpointing": gradient_checkpointing_on(config),
        "error": f"{type(error).__name__}: {_first_line(error)}",
    }
    if step is not None:
        figures["step"] = step
    message = f"out of memory at micro-batch {micro}"
    if retry is not None:
        figures["retry"] = retry
        message += (
            f"; retrying with micro-batch {retry['micro_batch']} × accumulation {retry['accumulation']} "
            "(effective batch kept)"
        )
    return Diagnosis(kind="oom", message=message, advice=advice, figures=figures)


def slow_training_advice(
    config: TrainingConfig, precision: str, figures: dict[str, Any], reasons: list[str]
) -> list[str]:
    """The troubleshooting advice for slow training, keeping the items that the measured `reasons` point to."""
    advice = []
    if "precision" in reasons:
        advice.append(f"Enable mixed precision (this run trains in {precision}; use bf16 where supported).")
    if "memory_headroom" in reasons:
        share = figures.get("accelerator_memory_share")
        advice.append(
            "Increase the batch size if GPU memory allows"
            + (f" (the peak used {share:.0%} of it)." if isinstance(share, float) else ".")
        )
    if "padding" in reasons:
        waste = figures.get("padding_share")
        advice.append(
            f"Reduce max_length if your data is shorter (now {config.max_length}; "
            + (f"{waste:.0%} of the batched tokens are padding)." if isinstance(waste, float) else "much is padding).")
            + " Packing helps too, with correct masks and a compatible attention kernel."
        )
    if "logging" in reasons:
        advice.append(
            f"Check logging_steps: logging every step adds compute time (now {config.logging_steps}; "
            f"logging took {figures.get('logging_share', 0.0):.0%} of the time)."
        )
    if "data_loading" in reasons:
        advice.append(
            f"Profile data loading and the distribution of example lengths (waiting for batches took "
            f"{figures.get('data_share', 0.0):.0%} of the time)."
        )
    return advice


def interrupted_diagnosis() -> Diagnosis:
    """The run was interrupted (signal or Ctrl-C)."""
    return Diagnosis("interrupted", "training was interrupted", ["Resume from the newest checkpoint."])


def diagnose_failure(
    error: BaseException,
    config: TrainingConfig | None = None,
    precision: str = "fp32",
    *,
    step: int | None = None,
) -> Diagnosis:
    """The diagnosis for an exception a training run ended with."""
    if isinstance(error, DiagnosedError):
        return error.diagnosis
    if config is not None and is_out_of_memory(error):
        return oom_diagnosis(config, precision, error, step=step)
    if isinstance(error, KeyboardInterrupt):
        return interrupted_diagnosis()
    return Diagnosis(
        "error",
        f"{type(error).__name__}: {_first_line(error)}",
        ["Read the message; resume from the newest checkpoint once the cause is fixed."],
        {"step": step} if step is not None else {},
    )


class NanLossGuard(TrainerCallback):
    """Stops training at the first logged loss that is NaN or infinite, raising `NanLossError`.

    The logged loss is the mean over the logging interval with the trainer's NaN filter off,
    so one bad step anywhere in the interval makes it non-finite: the run stops within one
    logging interval instead of training on garbage until the end.
    """

    def __init__(self, config: TrainingConfig, precision: str, counts: dict[str, int] | None = None) -> None:
        self.config = config
        self.precision = precision
        self.counts = counts or {}
        self.tripped: Diagnosis | None = None

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(loss)):
            return
        grad = (logs or {}).get("grad_norm")
        self.tripped = nan_loss_diagnosis(
            self.config,
            self.precision,
            step=int(state.global_step),
            loss=float(loss),
            grad_norm=float(grad) if grad is not None else None,
            counts=self.counts,
        )
        raise NanLossError(self.tripped)


def _precision_advice(precision: str) -> str:
    if precision == "fp16":
        return "Switch from fp16 to bf16, or use fp32 (this run uses fp16, whose range overflows first)."
    if precision == "bf16":
        return "Switch from fp16 to bf16, or use fp32 (this run already uses bf16: try fp32)."
    return "Switch from fp16 to bf16, or use fp32 (this run already uses fp32)."


def _data_advice(counts: dict[str, int]) -> str:
    text = "Check that the dataset has no empty or malformed examples"
    if not counts:
        return text + "."
    parts = [f"{counts.get('total', 0)} training examples"]
    parts.append(f"{counts.get('no_answer', 0)} with no trained token")
    parts.append(f"{counts.get('lost_all_answer', 0)} whose answer truncation removed entirely")
    parts.append(f"{counts.get('truncated', 0)} truncated")
    return f"{text} (data report: {', '.join(parts)})."


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
