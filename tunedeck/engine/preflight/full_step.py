"""Check 4: one full step (forward, backward, optimizer update) at the configured max_length and micro-batch.

The step runs on the run's own trainer with the longest training examples, tiled to
`max_length` by default (the worst case the config allows). For preference tasks that is
the run's TRL trainer with its reference (a full fine-tune's frozen copy is in the measured
memory) on the examples whose prompt and longest answer are longest, answers tiled. Peak accelerator memory and
peak host memory are measured at two micro-batch sizes, and the memory fit chooses the
micro-batch the run will use under the memory cap (real or simulated). With
`gradient_checkpointing: "auto"` the fit without checkpointing also decides whether the run
checkpoints (`tunedeck.engine.training.checkpointing_choice`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from tunedeck.core.errors import TunedeckError
from tunedeck.engine.host.memory_fit import MemoryFitDecision, MemoryPoint, decide_micro_batch
from tunedeck.engine.preflight.context import PreflightContext
from tunedeck.engine.preflight.measure import HostRssProbe, accelerator_probe, free_accelerator_memory
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.engine.training.checkpointing_choice import fits_without_checkpointing, resolve_gradient_checkpointing
from tunedeck.engine.training.diagnosis import DiagnosedError, is_out_of_memory, oom_diagnosis
from tunedeck.engine.training.training_data import example_answers, example_length


def check_full_step(ctx: PreflightContext) -> CheckResult:
    """Load the model, measure one step at two micro-batch sizes, and fit the micro-batch to memory.

    With `gradient_checkpointing: "auto"` the step is measured without checkpointing first; when
    that fit cannot keep the configured micro-batch, checkpointing is turned on and the step
    measured again, and the run uses that second fit (`resolve_gradient_checkpointing`).
    """
    ctx.require("precision", "resolved", "tokenizer", "data")
    setting = ctx.config.gradient_checkpointing
    # "auto" loads and measures without checkpointing first (a 4-bit base would otherwise be
    # prepared with it on, and the step measured without it would not be).
    ctx.checkpointing = resolve_gradient_checkpointing(False if setting == "auto" else setting, None)
    failure = load_for_training(ctx)
    if failure is not None:
        return failure
    accel = ctx.memory_probe or accelerator_probe(ctx.hardware)
    host = HostRssProbe()
    without: _Measured | None = None
    outcome: _Measured | CheckResult
    if setting == "auto":
        first = _measure(ctx, accel, host)
        if isinstance(first, CheckResult):
            return first
        without = first
        ctx.checkpointing = resolve_gradient_checkpointing(setting, fits_without_checkpointing(first.fit))
        outcome = _measure(ctx, accel, host) if ctx.checkpointing.enabled else first
    else:
        ctx.checkpointing = resolve_gradient_checkpointing(setting, None)
        outcome = _measure(ctx, accel, host)
    if isinstance(outcome, CheckResult):
        return outcome
    figures = outcome.figures
    figures["gradient_checkpointing"] = ctx.checkpointing.to_dict()
    if without is not None and without is not outcome:
        figures["without_checkpointing"] = without.figures
    config = ctx.run_config
    if outcome.fit is None:
        assert outcome.last_oom is not None  # every size ran out of memory
        smallest = ctx.smallest_micro_batch
        diagnosis = oom_diagnosis(config, str(ctx.precision), outcome.last_oom, micro_batch=smallest, accumulation=1)
        return CheckResult(4, "fail", f"out of memory even at micro-batch {smallest}", figures, diagnosis.advice)
    ctx.memory_fit = fit = outcome.fit
    suffix = f"; {ctx.checkpointing.reason}" if setting == "auto" else ""
    if not fit.fits:
        advice = oom_diagnosis(config, str(ctx.precision), MemoryError()).advice
        return CheckResult(4, "fail", fit.explanation + suffix, figures, advice)
    if fit.changed or outcome.ooms:
        return CheckResult(4, "warn", fit.explanation + suffix, figures)
    return CheckResult(4, "pass", fit.explanation + suffix, figures)


@dataclass
class _Measured:
    """One round of step measurements under the context's current checkpointing, and its memory fit."""

    figures: dict[str, Any]
    fit: MemoryFitDecision | None  # None when every size ran out of memory
    ooms: list[int]
    last_oom: BaseException | None


def _measure(ctx: PreflightContext, accel: Any, host: HostRssProbe) -> _Measured | CheckResult:
    """Measure the step at two micro-batches (halving on out-of-memory) and fit the micro-batch to the cap."""
    config = ctx.config
    requested = config.batch_size
    smallest = ctx.smallest_micro_batch  # kto's KL term needs two completions per micro-batch
    sizes = measured_sizes(requested, smallest)
    measured: dict[int, dict[str, Any]] = {}
    ooms: list[int] = []
    last_oom: BaseException | None = None
    while sizes:
        size = sizes.pop(0)
        try:
            measured[size] = measure_step(ctx, size, accel, host)
        except DiagnosedError as error:
            return CheckResult(4, "fail", error.diagnosis.message, error.diagnosis.figures, error.diagnosis.advice)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            free_accelerator_memory()
            ooms.append(size)
            last_oom = error
            smaller = min([*measured, size]) // 2
            if smaller >= smallest and smaller not in measured and smaller not in sizes:
                sizes.insert(0, smaller)
    figures: dict[str, Any] = {
        "micro_batch": requested,
        "max_length": config.max_length,
        "step_length": ctx.options.step_length,
        "measured": {str(size): value for size, value in sorted(measured.items())},
        "out_of_memory_at": ooms,
    }
    if not measured:
        return _Measured(figures, None, ooms, last_oom)
    key = "accelerator_peak_bytes" if accel is not None else "host_peak_bytes"
    points = [MemoryPoint(size, int(value[key])) for size, value in sorted(measured.items()) if value.get(key)]
    cap, source = memory_cap(ctx, accel is not None)
    fit = decide_micro_batch(
        points,
        cap,
        requested,
        config.gradient_accumulation_steps,
        safety_margin=ctx.options.safety_margin,
        cap_source=source,
        min_micro_batch=smallest,
    )
    figures["memory_fit"] = fit.to_dict()
    at_config = measured.get(requested) or measured[max(measured)]
    figures.update(
        accelerator_peak_bytes=at_config.get("accelerator_peak_bytes"),
        host_peak_bytes=at_config.get("host_peak_bytes"),
        step_seconds=at_config.get("seconds"),
        loss=at_config.get("loss"),
    )
    if ctx.reference is not None:
        figures["reference_model"] = ctx.reference.description  # a frozen copy is in the measured peaks
    return _Measured(figures, fit, ooms, last_oom)


def measured_sizes(requested: int, smallest: int = 1) -> list[int]:
    """The micro-batches the step is measured at: half the requested one and itself, or it and twice it.

    Two sizes give the memory line's slope; none is below `smallest` (kto's 2), so the
    step never runs at a micro-batch the task cannot train with.
    """
    sizes = sorted({max(smallest, requested // 2), requested})
    return sizes if len(sizes) > 1 else [requested, requested * 2]


def load_for_training(ctx: PreflightContext) -> CheckResult | None:
    """Load the model as the run does (seeded, packing prepared); a failure becomes the check's result."""
    from transformers import set_seed

    from tunedeck.engine.models.model_loading import load_model
    from tunedeck.engine.training.training_data import pack_splits

    config = ctx.run_config  # gradient_checkpointing as measured (it decides how a 4-bit base is prepared)
    set_seed(config.seed)
    try:
        ctx.loaded = load_model(
            ctx.resolved, config, ctx.hardware, str(ctx.precision), ctx.tokenizer, ctx.data.label2id
        )
        if config.packing is True and not ctx.data.packed:
            from tunedeck.engine.speedups.packed_attention import require_packing_support

            require_packing_support(ctx.loaded.model, config.max_length)
            pack_splits(ctx.data, config.max_length)
    except TunedeckError as error:
        ctx.problems["loaded"] = str(error)
        return CheckResult(4, "fail", str(error))
    return None


def measure_step(ctx: PreflightContext, micro_batch: int, accel: Any, host: HostRssProbe) -> dict[str, Any]:
    """Run one optimizer step on a worst-case batch and return its peaks, time and loss."""
    dataset = step_examples(ctx, micro_batch)
    trainer = ctx.trial_trainer(
        dataset, ctx.work_dir / f"step-{micro_batch}", micro_batch=micro_batch, accumulation=1, max_steps=1
    )
    free_accelerator_memory()
    if accel is not None:
        accel.reset()
    host.reset()
    started = time.perf_counter()
    try:
        trainer.train()
        seconds = time.perf_counter() - started
        accel_peak = accel.peak_bytes() if accel is not None else None
        host_peak = host.peak_bytes()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    finally:
        trainer.optimizer = None
        ctx.loaded.model.zero_grad(set_to_none=True)
        del trainer
        free_accelerator_memory()
    return {
        "micro_batch": micro_batch,
        "sequence_length": max(example_length(f) for f in dataset.features),
        "tokens": dataset.token_count(),
        "seconds": round(seconds, 4),
        "accelerator_peak_bytes": accel_peak,
        "accelerator_reserved_bytes": getattr(accel, "reserved", None),
        "host_peak_bytes": host_peak,
        "loss": losses[0] if losses else None,
    }


def step_examples(ctx: PreflightContext, micro_batch: int) -> Any:
    """The `micro_batch` longest training examples, tiled to max_length when `step_length` says so.

    A preference example's length is its prompt with its longest answer (a pair's batch holds
    both answers); tiling repeats the answers, never the prompt, up to max_length.
    """
    from tunedeck.engine.training.training_data import ExampleDataset

    features = sorted(ctx.data.train.features, key=example_length, reverse=True)
    features = (features * math.ceil(micro_batch / len(features)))[:micro_batch]
    if ctx.options.step_length != "max_length" or ctx.data.packed:
        return ExampleDataset(list(features))
    length = ctx.config.max_length
    return ExampleDataset([tiled_example(feature, length) for feature in features])


def tiled_example(feature: dict[str, Any], length: int) -> dict[str, Any]:
    """`feature` with its tokens repeated to `length`: input_ids and labels, or each answer after the prompt."""
    answers = example_answers(feature)
    if answers:
        room = length - len(feature["prompt_ids"])
        return {**feature, **{column: _tiled(feature[column], room) for column in answers}}
    example = {"input_ids": _tiled(feature["input_ids"], length)}
    labels = feature["labels"]
    example["labels"] = _tiled(labels, length) if isinstance(labels, list) else labels
    return example


def _tiled(ids: Any, length: int) -> list[Any]:
    """`ids` repeated and cut to `length` (left as they are when empty or when there is no room)."""
    ids = list(ids)
    if not ids or length <= 0:
        return ids
    return (ids * math.ceil(length / len(ids)))[:length]


def memory_cap(ctx: PreflightContext, on_accelerator: bool) -> tuple[int, str]:
    """The memory the fit must stay under: the simulated cap, the device's memory, or the host's."""
    import psutil

    if ctx.memory_cap_bytes is not None:
        return int(ctx.memory_cap_bytes), "simulated"
    if on_accelerator and ctx.hardware.total_memory_bytes:
        return int(ctx.hardware.total_memory_bytes), "accelerator"
    if on_accelerator and ctx.hardware.backend == "mps":
        return int(psutil.virtual_memory().total), "unified"
    return int(psutil.Process().memory_info().rss + psutil.virtual_memory().available), "host"
