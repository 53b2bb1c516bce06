"""Why training is slow: the split of step time between data loading, compute and logging, and padding waste.

`TrainingSpeedMonitor` is a trainer callback that times the gaps between the trainer's hooks:
waiting for the next batches (before a step begins), the step itself (forward, backward,
optimizer), and logging (from the step's end to the log callback). Its collator wrapper
counts padding. Once enough steps are measured it compares the figures with thresholds and
writes one `slow` diagnosis with the matching troubleshooting advice when one is crossed; the
figures themselves always go into the run's results.

On CUDA and ROCm the hooks run ahead of the device, so host timestamps would measure the
queueing of work, and synchronising at every hook would stall the pipeline the monitor is
meant to judge. There the boundaries are CUDA events instead: recorded in the stream at
each hook, read without blocking on logging steps (when the trainer has already waited for
the loss) and waited for once when the figures are asked for at the end.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from transformers import TrainerCallback

from tunedeck.config.training import TrainingConfig
from tunedeck.core.events import EventWriter
from tunedeck.engine.training.diagnosis import Diagnosis, slow_training_advice


@dataclass(frozen=True)
class SpeedThresholds:
    """When a measured share counts as a cause of slowness."""

    data_share: float = 0.20
    logging_share: float = 0.05
    padding_share: float = 0.30
    memory_headroom_share: float = 0.50  # peak accelerator memory below this share of the device
    min_steps: int = 20  # steps measured before judging


class PaddingCountingCollator:
    """Wraps a collator to count padded and real positions, and the time spent collating."""

    def __init__(self, collator: Any) -> None:
        self.collator = collator
        self.positions = 0
        self.padding = 0
        self.seconds = 0.0

    def __call__(self, examples: list[dict[str, Any]]) -> Any:
        """Collate as the wrapped collator does, counting as it goes."""
        started = time.perf_counter()
        batch = self.collator(examples)
        self.seconds += time.perf_counter() - started
        # Counted from the examples, not the attention mask: a packed batch carries a 4D
        # block-diagonal mask whose entries are query/key pairs, not token positions.
        ids = batch.get("input_ids") if hasattr(batch, "get") else None
        real = sum(len(example.get("input_ids", ())) for example in examples if hasattr(example, "get"))
        if ids is not None and real:
            self.positions += int(ids.numel())
            self.padding += max(0, int(ids.numel()) - real)
        return batch


class _HostClock:
    """Boundaries as host timestamps: right on a CPU, where work runs when it is called."""

    def mark(self) -> float:
        return time.perf_counter()

    def ready(self, mark: Any) -> bool:
        return True

    def wait(self, mark: Any) -> None:
        return None

    def seconds(self, start: Any, end: Any) -> float:
        return float(end - start)


class _DeviceClock:
    """Boundaries as CUDA events in the current stream: timed on the device, read without a sync.

    The gap between two events is device time, so a step's compute is the device's time
    from its first kernel's launch point to its last, and a data or logging gap is the
    time the device sat waiting for the host: the cost that matters (host work hidden
    behind queued kernels costs nothing and measures close to zero).
    """

    def __init__(self) -> None:
        import torch

        self._event = torch.cuda.Event

    def mark(self) -> Any:
        event = self._event(enable_timing=True)
        event.record()
        return event

    def ready(self, mark: Any) -> bool:
        return bool(mark.query())  # cudaEventQuery: never blocks

    def wait(self, mark: Any) -> None:
        mark.synchronize()

    def seconds(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) / 1000.0


class TrainingSpeedMonitor(TrainerCallback):
    """Times data loading, compute and logging per optimizer step; emits a `slow` diagnosis when warranted.

    Adds no host synchronisation per step: on CUDA and ROCm it waits for the device once,
    when `figures()` is called after training (see the module docstring).
    """

    def __init__(
        self,
        config: TrainingConfig,
        precision: str,
        events: EventWriter | None = None,
        *,
        thresholds: SpeedThresholds | None = None,
        accelerator_total_bytes: int | None = None,
        hardware_supports_bf16: bool = False,
        backend: str = "cpu",
    ) -> None:
        self.config = config
        self.precision = precision
        self.events = events
        self.thresholds = thresholds or SpeedThresholds()
        self.accelerator_total_bytes = accelerator_total_bytes
        self.hardware_supports_bf16 = hardware_supports_bf16
        self.backend = backend
        self.collator: PaddingCountingCollator | None = None
        self.steps = 0
        self.data_s = 0.0
        self.compute_s = 0.0
        self.logging_s = 0.0
        self.other_s = 0.0  # evaluation and checkpoint saves between steps
        self._clock: _HostClock | _DeviceClock | None = None
        # Measured intervals not yet read: (what the time was spent on, start mark, end mark).
        self._pending: deque[tuple[str, Any, Any]] = deque()
        self._boundary: Any = None
        self._step_started: Any = None
        self._step_ended: Any = None
        self._interrupted = False
        self._judged_early = False
        self.diagnosis: Diagnosis | None = None

    def wrap(self, collator: Any) -> PaddingCountingCollator:
        """Return the collator wrapped so padding is counted; pass the result to the trainer."""
        self.collator = PaddingCountingCollator(collator)
        return self.collator

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._boundary = self._mark()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = self._mark()
        if self._boundary is not None:
            self._pending.append(("other" if self._interrupted else "data", self._boundary, now))
        self._interrupted = False
        self._step_started = now

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = self._mark()
        if self._step_started is not None:
            self._pending.append(("compute", self._step_started, now))
        self._step_ended = self._boundary = now
        if isinstance(self._clock, _HostClock):
            self._read(block=False)  # free on the host; on a device, reading waits for a logging step

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self._step_ended is not None and self._boundary is self._step_ended:
            now = self._mark()
            self._pending.append(("logging", self._step_ended, now))
            self._boundary = now
        self._read(block=False)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._interrupted = True  # the time until the next step is saving, not data loading

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._interrupted = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._read(block=True)
        if self.diagnosis is None and self.steps >= self.thresholds.min_steps:
            self.judge()

    def figures(self) -> dict[str, Any]:
        """The measured split, shares and padding waste (what results.json records)."""
        self._read(block=True)
        return self._figures()

    def _figures(self) -> dict[str, Any]:
        total = self.data_s + self.compute_s + self.logging_s
        figures: dict[str, Any] = {
            "steps_measured": self.steps,
            "data_seconds": round(self.data_s, 4),
            "compute_seconds": round(self.compute_s, 4),
            "logging_seconds": round(self.logging_s, 4),
            "eval_and_save_seconds": round(self.other_s, 4),
            "data_share": round(self.data_s / total, 4) if total else None,
            "compute_share": round(self.compute_s / total, 4) if total else None,
            "logging_share": round(self.logging_s / total, 4) if total else None,
            "seconds_per_step": round(total / self.steps, 4) if self.steps else None,
            "precision": self.precision,
            "logging_steps": self.config.logging_steps,
            "timed_on": "device" if isinstance(self._clock, _DeviceClock) else "host",
        }
        if self.collator is not None and self.collator.positions:
            figures["padding_share"] = round(self.collator.padding / self.collator.positions, 4)
            figures["collate_seconds"] = round(self.collator.seconds, 4)
        peak = _accelerator_peak(self.backend)
        if peak is not None and self.accelerator_total_bytes:
            figures["accelerator_peak_bytes"] = peak
            figures["accelerator_memory_share"] = round(peak / self.accelerator_total_bytes, 4)
        return figures

    def reasons(self, figures: dict[str, Any]) -> list[str]:
        """The causes of slowness the figures show, by the thresholds."""
        limits = self.thresholds
        found = []
        if (figures.get("data_share") or 0.0) > limits.data_share:
            found.append("data_loading")
        if (figures.get("logging_share") or 0.0) > limits.logging_share:
            found.append("logging")
        if (figures.get("padding_share") or 0.0) > limits.padding_share:
            found.append("padding")
        if self.precision == "fp32" and self.backend in ("cuda", "rocm"):
            found.append("precision")
        share = figures.get("accelerator_memory_share")
        if isinstance(share, float) and share < limits.memory_headroom_share:
            found.append("memory_headroom")
        return found

    def judge(self) -> Diagnosis | None:
        """Emit a `slow` diagnosis when a threshold is crossed (once per run)."""
        figures = self._figures()
        reasons = self.reasons(figures)
        if not reasons:
            return None
        self.diagnosis = Diagnosis(
            kind="slow",
            message=f"training time is lost to: {', '.join(r.replace('_', ' ') for r in reasons)}",
            advice=slow_training_advice(self.config, self.precision, figures, reasons),
            figures={**figures, "reasons": reasons},
        )
        if self.events is not None:
            self.diagnosis.emit(self.events)
        return self.diagnosis

    def _mark(self) -> Any:
        if self._clock is None:
            self._clock = _DeviceClock() if self.backend in ("cuda", "rocm") else _HostClock()
        return self._clock.mark()

    def _read(self, *, block: bool) -> None:
        """Add the measured intervals to the totals: those complete, or (block) all after one wait."""
        clock = self._clock
        if clock is None or not self._pending:
            return
        if block:
            clock.wait(self._pending[-1][2])  # events complete in stream order: one wait covers all
        while self._pending:
            bucket, start, end = self._pending[0]
            if not clock.ready(end):
                break
            self._pending.popleft()
            seconds = clock.seconds(start, end)
            if bucket == "compute":
                self.compute_s += seconds
                self.steps += 1
            elif bucket == "data":
                self.data_s += seconds
            elif bucket == "logging":
                self.logging_s += seconds
            else:
                self.other_s += seconds
        if not self._judged_early and self.diagnosis is None and self.steps >= self.thresholds.min_steps:
            self._judged_early = True  # judged once as soon as enough steps are measured, again at the end
            self.judge()


def _accelerator_peak(backend: str) -> int | None:
    if backend not in ("cuda", "rocm"):
        return None
    import torch

    return int(torch.cuda.max_memory_allocated())
