"""Choosing the micro-batch from measured memory peaks, keeping the effective batch size the user asked for.

Generic tables from parameter count to memory are unreliable, so the checks before
training measure instead: sequence length, precision, optimizer state, activations,
adapters, attention kernels and batching all change the figure. So the peak of one full
step is measured at two micro-batch sizes on the real hardware, a line
`peak = base + per_example × micro_batch` is fitted through them, and the largest
micro-batch whose projected peak stays under the memory cap minus a safety margin is
chosen. Gradient accumulation grows so that micro-batch × accumulation stays the
requested effective batch: exactly when it divides, otherwise the rounding is explained
in the decision.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from tunedeck.config.training import TrainingConfig

DEFAULT_SAFETY_MARGIN = 0.10


@dataclass(frozen=True)
class MemoryPoint:
    """The measured peak of one full step at one micro-batch size."""

    micro_batch: int
    peak_bytes: int


@dataclass(frozen=True)
class BatchSplit:
    """A micro-batch and accumulation for an effective batch size."""

    micro_batch: int
    accumulation: int
    exact: bool

    @property
    def effective(self) -> int:
        """micro_batch × accumulation."""
        return self.micro_batch * self.accumulation


@dataclass
class MemoryFitDecision:
    """What the memory fit chose and every figure it chose from (recorded in the run)."""

    requested_micro_batch: int
    requested_accumulation: int
    micro_batch: int
    accumulation: int
    exact: bool
    fits: bool
    cap_bytes: int
    usable_bytes: int
    safety_margin: float
    cap_source: str
    base_bytes: float
    per_example_bytes: float
    largest_fitting_micro_batch: int
    projected_peak_bytes: float
    points: list[MemoryPoint] = field(default_factory=list)
    explanation: str = ""

    @property
    def requested_effective_batch(self) -> int:
        """The effective batch per process the config asked for."""
        return self.requested_micro_batch * self.requested_accumulation

    @property
    def effective_batch(self) -> int:
        """The effective batch per process after the decision."""
        return self.micro_batch * self.accumulation

    @property
    def changed(self) -> bool:
        """Whether the run must use a different micro-batch than configured."""
        return self.micro_batch != self.requested_micro_batch

    def apply_to(self, config: TrainingConfig) -> TrainingConfig:
        """`config` with the chosen micro-batch and accumulation (validated again)."""
        return type(config).model_validate(
            {
                **config.model_dump(exclude_unset=True),
                "batch_size": self.micro_batch,
                "gradient_accumulation_steps": self.accumulation,
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with the derived figures."""
        out = asdict(self)
        out["points"] = [asdict(point) for point in self.points]
        out["requested_effective_batch"] = self.requested_effective_batch
        out["effective_batch"] = self.effective_batch
        out["changed"] = self.changed
        return out


def fit_line(points: list[MemoryPoint]) -> tuple[float, float]:
    """Least-squares `(base, per_example)` through the points; one point gives a zero slope.

    A negative slope can only be measurement noise (memory never shrinks with more examples),
    so it is clamped to zero.
    """
    if not points:
        raise ValueError("memory fit needs at least one measured point")
    xs = [float(p.micro_batch) for p in points]
    ys = [float(p.peak_bytes) for p in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return max(ys), 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    if slope <= 0:
        return max(ys), 0.0
    return mean_y - slope * mean_x, slope


def split_effective_batch(
    effective: int, max_micro_batch: int, *, exact_only: bool = False, min_micro_batch: int = 1
) -> BatchSplit:
    """The largest micro-batch not above `max_micro_batch` for an effective batch of `effective`.

    A divisor of `effective` keeps the effective batch exact. When the largest divisor is
    below half of `max_micro_batch` (too much throughput lost) and inexact splits are
    allowed, the largest micro-batch is used with the accumulation rounded to the nearest
    whole number. The micro-batch is never below `min_micro_batch` (kto's KL term needs 2):
    a ValueError says when no split reaches it.
    """
    if effective < 1 or max_micro_batch < 1:
        raise ValueError("effective batch and micro-batch must be at least 1")
    limit = min(max_micro_batch, effective)
    divisors = [d for d in range(min_micro_batch, limit + 1) if effective % d == 0]
    if not divisors and (exact_only or limit < min_micro_batch):
        raise ValueError(
            f"no micro-batch between {min_micro_batch} and {limit} divides the effective batch of {effective}"
        )
    divisor = max(divisors, default=0)
    if exact_only or divisor * 2 >= limit:
        return BatchSplit(divisor, effective // divisor, True)
    accumulation = max(1, round(effective / limit))
    return BatchSplit(limit, accumulation, limit * accumulation == effective)


def decide_micro_batch(
    points: list[MemoryPoint],
    cap_bytes: int,
    requested_micro_batch: int,
    requested_accumulation: int,
    *,
    safety_margin: float = DEFAULT_SAFETY_MARGIN,
    cap_source: str = "accelerator",
    min_micro_batch: int = 1,
) -> MemoryFitDecision:
    """Choose the micro-batch and accumulation from measured peaks under `cap_bytes`.

    The micro-batch never grows beyond the configured one (a larger one is reported as
    `largest_fitting_micro_batch`, for the user to choose); it shrinks when the configured
    one is projected above the usable memory, but never below `min_micro_batch` (kto's 2):
    when that does not fit either, the decision does not fit.
    """
    if not 0 <= safety_margin < 1:
        raise ValueError("safety_margin must be in [0, 1)")
    base, slope = fit_line(points)
    usable = int(cap_bytes * (1 - safety_margin))
    effective = requested_micro_batch * requested_accumulation
    largest = _largest_fitting_micro_batch(base, slope, usable, effective)

    def projected(micro: int) -> float:
        return base + slope * micro

    common = {
        "requested_micro_batch": requested_micro_batch,
        "requested_accumulation": requested_accumulation,
        "cap_bytes": int(cap_bytes),
        "usable_bytes": usable,
        "safety_margin": safety_margin,
        "cap_source": cap_source,
        "base_bytes": round(base, 1),
        "per_example_bytes": round(slope, 1),
        "largest_fitting_micro_batch": largest,
        "points": list(points),
    }
    usable_text = f"{_gib(usable)} usable ({_gib(cap_bytes)} {cap_source} cap less {safety_margin:.0%} margin)"
    if largest >= requested_micro_batch:
        return MemoryFitDecision(
            micro_batch=requested_micro_batch,
            accumulation=requested_accumulation,
            exact=True,
            fits=True,
            projected_peak_bytes=round(projected(requested_micro_batch), 1),
            explanation=(
                f"micro-batch {requested_micro_batch} is projected at {_gib(projected(requested_micro_batch))} "
                f"of {usable_text}; kept"
            ),
            **common,  # type: ignore[arg-type]
        )
    smallest = max(1, min_micro_batch)
    split = _split_at_least(effective, largest, smallest) if largest >= smallest else None
    if split is None:
        return _not_fitting(smallest, effective, projected(smallest), usable_text, common)
    explanation = (
        f"micro-batch {requested_micro_batch} is projected at {_gib(projected(requested_micro_batch))}, above "
        f"{usable_text}; micro-batch {split.micro_batch} × accumulation {split.accumulation}"
        + _effective_batch_note(split, effective, largest)
    )
    return MemoryFitDecision(
        micro_batch=split.micro_batch,
        accumulation=split.accumulation,
        exact=split.exact,
        fits=True,
        projected_peak_bytes=round(projected(split.micro_batch), 1),
        explanation=explanation,
        **common,  # type: ignore[arg-type]
    )


def _largest_fitting_micro_batch(base: float, slope: float, usable: int, effective: int) -> int:
    """The largest micro-batch (up to the effective batch) whose projected peak stays within `usable`; 0 if none."""
    if slope == 0:
        return effective if base <= usable else 0
    return max(0, min(effective, math.floor((usable - base) / slope)))


def _not_fitting(
    smallest: int, effective: int, projected_peak: float, usable_text: str, common: dict[str, Any]
) -> MemoryFitDecision:
    """The decision when even the smallest micro-batch the task trains with is projected above the usable memory."""
    floor_text = f"micro-batch {smallest}" + ("" if smallest == 1 else " (the smallest this task trains with)")
    return MemoryFitDecision(
        micro_batch=smallest,
        accumulation=max(1, effective // smallest),
        exact=effective % smallest == 0,
        fits=False,
        projected_peak_bytes=round(projected_peak, 1),
        explanation=(
            f"even {floor_text} is projected at {_gib(projected_peak)}, above {usable_text}: "
            "reduce max_length, enable LoRA or QLoRA, or enable gradient checkpointing"
        ),
        **common,
    )


def _effective_batch_note(split: BatchSplit, effective: int, largest: int) -> str:
    """Whether a smaller micro-batch keeps the effective batch, and why not when it does not."""
    if split.exact:
        return f" keeps the effective batch of {effective}"
    return (
        f" gives an effective batch of {split.effective} instead of {effective}: {effective} has no divisor "
        f"between {largest // 2 + 1} and {largest}, and a smaller exact micro-batch would lose over half "
        "the throughput"
    )


def _split_at_least(effective: int, largest: int, smallest: int) -> BatchSplit | None:
    """`split_effective_batch` with a micro-batch of at least `smallest`, or None when none exists."""
    try:
        return split_effective_batch(effective, largest, min_micro_batch=smallest)
    except ValueError:
        return None


def _gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"
