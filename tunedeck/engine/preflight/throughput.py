"""Check 7: sustained throughput over several steps, not just the first, with GPU thermals sampled.

After a few warm-up steps (kernel selection, allocator growth), the optimizer steps are timed
at the micro-batch and accumulation the run will use. GPU temperature, clocks and power are
sampled alongside (NVML on NVIDIA, amdsmi on AMD); a driver-reported slowdown or falling
clocks, or steps that grow slower as the run goes on, are reported as throttling. With a
validation file it also times the run's baseline evaluation on a few rows while the model
is loaded, for the margins of check 8 (see `eval_cost`).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from transformers import TrainerCallback

from tunedeck.engine.host.gpu_telemetry import TelemetrySampler, open_telemetry, summarize_samples
from tunedeck.engine.preflight.context import PreflightContext
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.engine.training.diagnosis import DiagnosedError
from tunedeck.engine.training.training_speed import SpeedThresholds, TrainingSpeedMonitor

_SLOWDOWN_WARN = 1.15  # late steps this much slower than early ones suggest throttling


class StepClock(TrainerCallback):
    """Duration and tokens of every optimizer step."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.durations: list[float] = []
        self.tokens: list[int] = []
        self._last: float | None = None
        self._last_tokens = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._last = self._now()
        self._last_tokens = int(state.num_input_tokens_seen or 0)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = self._now()
        seen = int(state.num_input_tokens_seen or 0)
        if self._last is not None:
            self.durations.append(now - self._last)
            self.tokens.append(seen - self._last_tokens)
        self._last, self._last_tokens = now, seen

    def _now(self) -> float:
        if self.backend in ("cuda", "rocm"):
            import torch

            torch.cuda.synchronize()
        return time.perf_counter()


def check_throughput(ctx: PreflightContext) -> CheckResult:
    """Time warm-up plus measured steps and sample GPU telemetry while they run."""
    ctx.require("loaded", "data", "precision")
    options = ctx.options
    total_steps = options.throughput_warmup_steps + options.throughput_steps
    clock = StepClock(ctx.hardware.backend)
    monitor = TrainingSpeedMonitor(
        ctx.config,
        str(ctx.precision),
        thresholds=SpeedThresholds(min_steps=10**9),  # figures only; judging belongs to the real run
        accelerator_total_bytes=ctx.hardware.total_memory_bytes,
        backend=ctx.hardware.backend,
    )
    trainer = ctx.trial_trainer(
        ctx.data.train,
        ctx.work_dir / "throughput",
        micro_batch=ctx.micro_batch,
        accumulation=ctx.accumulation,
        max_steps=total_steps,
        callbacks=[clock, monitor],
        # Preference trainers batch with their own collators: the data-loading share is not split out for them.
        collator=None if ctx.preference else monitor.wrap(ctx.base_collator()),
    )
    source = ctx.telemetry or open_telemetry(ctx.hardware)
    sampler = TelemetrySampler(source)
    sampler.start()
    try:
        trainer.train()
    except DiagnosedError as error:
        return CheckResult(7, "fail", error.diagnosis.message, error.diagnosis.figures, error.diagnosis.advice)
    finally:
        samples = sampler.stop()
        trainer.optimizer = None
        if ctx.telemetry is None:
            source.close()
    warm = options.throughput_warmup_steps
    measured = clock.durations[warm:] or clock.durations
    tokens = clock.tokens[warm:] or clock.tokens
    telemetry = summarize_samples(samples, source.name)
    if not telemetry["available"]:
        telemetry["reason"] = getattr(source, "reason", None)
    sustained = statistics.median(measured)
    third = max(1, len(measured) // 3)
    early, late = statistics.fmean(measured[:third]), statistics.fmean(measured[-third:])
    slowdown = late / early if early > 0 else 1.0
    ctx.step_seconds = sustained
    evaluation = _measure_evaluation(ctx)
    examples_per_step = ctx.micro_batch * ctx.accumulation
    figures: dict[str, Any] = {
        "micro_batch": ctx.micro_batch,
        "accumulation": ctx.accumulation,
        "warmup_steps": warm,
        "measured_steps": len(measured),
        "first_step_seconds": round(clock.durations[0], 4) if clock.durations else None,
        "sustained_step_seconds": round(sustained, 4),
        "examples_per_second": round(examples_per_step / sustained, 3) if sustained > 0 else None,
        "tokens_per_second": round(sum(tokens) / sum(measured), 1) if sum(measured) > 0 else None,
        "late_over_early_step_time": round(slowdown, 3),
        "time_split": monitor.figures(),
        "gpu": telemetry,
        "evaluation": evaluation,
    }
    notes = []
    if telemetry.get("throttled"):
        notes.append(f"the GPU throttled ({', '.join(telemetry['throttle_reasons']) or 'clocks fell under load'})")
    if slowdown > _SLOWDOWN_WARN and len(measured) >= 3:
        notes.append(f"late steps are {slowdown:.2f}× slower than early ones")
    message = f"{sustained:.3f} s per optimizer step sustained over {len(measured)} steps"
    if notes:
        return CheckResult(
            7,
            "warn",
            message + "; " + "; ".join(notes),
            figures,
            ["check cooling and power limits; measure again after the GPU has warmed up"],
        )
    return CheckResult(7, "pass", message, figures)


def _measure_evaluation(ctx: PreflightContext) -> dict[str, Any] | None:
    """Time the baseline evaluation on a few rows while the model is loaded (check 8 projects it)."""
    from tunedeck.engine.preflight.eval_cost import measure_eval_cost

    try:
        ctx.eval_cost = measure_eval_cost(ctx)
    except Exception as error:  # the figure is for check 8; its absence is reported there, not here
        ctx.problems["eval_cost"] = f"{type(error).__name__}: {error}"
        return {"error": ctx.problems["eval_cost"]}
    return ctx.eval_cost.to_dict() if ctx.eval_cost is not None else None
