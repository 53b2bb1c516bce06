"""The phases of a rental laid end to end, and how they fit 3-, 7- and 30-day rentals.

The experiment method gives the order: the initial check (the checks before training,
then the untrained model's baseline evaluation), each variant's training and evaluation,
the final evaluation and the sealed test, a margin to reload a checkpoint in a new
process (a resume after an interruption), and the export. The whole is kept under the
rental with a margin on top (a share of the planned time) for what no figure foresees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tunedeck.planning.figures import Figure, PlanFigures, Source

RENTAL_DAYS = (3, 7, 30)
DEFAULT_MARGIN_SHARE = 0.2
DAY_S = 86_400.0

INITIAL_CHECK, VARIANT, FINAL_EVALUATION, RESUME_MARGIN, EXPORT = (
    "initial_check",
    "variant",
    "final_evaluation",
    "resume_margin",
    "export",
)


@dataclass(frozen=True)
class VariantWork:
    """What one variant trains: rows of its training set and epochs over them."""

    name: str
    train_rows: int
    epochs: int


@dataclass(frozen=True)
class Workload:
    """The experiment's work: its variants in the order they will run, and the evaluation sets' rows."""

    variants: tuple[VariantWork, ...]
    validation_rows: int
    test_rows: int


@dataclass(frozen=True)
class Part:
    """One piece of a phase, with the source of the figure it was computed from."""

    label: str
    seconds: float
    source: Source


@dataclass(frozen=True)
class Phase:
    """One bar of the timeline: its parts, and where it starts from the rental's start."""

    key: str
    kind: str
    label: str
    parts: tuple[Part, ...]
    start_s: float
    variant: str | None = None
    epochs: int | None = None  # a variant's epochs, for advice to train fewer

    @property
    def seconds(self) -> float:
        """The phase's planned duration."""
        return sum(part.seconds for part in self.parts)

    @property
    def end_s(self) -> float:
        """Seconds from the rental's start to the phase's planned end."""
        return self.start_s + self.seconds

    @property
    def estimated(self) -> bool:
        """Whether any part rests on an estimated figure."""
        return any(part.source == "estimated" for part in self.parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "key": self.key,
            "kind": self.kind,
            "label": self.label,
            "variant": self.variant,
            "epochs": self.epochs,
            "start_s": round(self.start_s, 1),
            "end_s": round(self.end_s, 1),
            "seconds": round(self.seconds, 1),
            "estimated": self.estimated,
            "parts": [{"label": p.label, "seconds": round(p.seconds, 1), "source": p.source} for p in self.parts],
        }


@dataclass(frozen=True)
class RentalFit:
    """How the plan fits one rental length."""

    days: int
    fits: bool
    spare_seconds: float  # rental time left after the plan and its margin (negative: over)
    variants_that_fit: int  # the first N variants that fit with every other phase and the margin
    cost: float | None  # the rental's price: days × 24 × the hourly price

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "days": self.days,
            "fits": self.fits,
            "spare_seconds": round(self.spare_seconds, 1),
            "variants_that_fit": self.variants_that_fit,
            "cost": None if self.cost is None else round(self.cost, 2),
        }


@dataclass(frozen=True)
class Timeline:
    """Every phase in order, the total with its margin, and the rentals it fits."""

    phases: tuple[Phase, ...]
    margin_share: float
    rentals: tuple[RentalFit, ...]
    price_per_hour: float | None = None
    estimated_figures: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total_seconds(self) -> float:
        """The planned work, end to end."""
        return self.phases[-1].end_s if self.phases else 0.0

    @property
    def margin_seconds(self) -> float:
        """The margin kept on top of the planned work."""
        return self.total_seconds * self.margin_share

    @property
    def needed_seconds(self) -> float:
        """The planned work with its margin: what a rental must hold."""
        return self.total_seconds + self.margin_seconds

    @property
    def shortest_rental_days(self) -> int | None:
        """The shortest rental that holds the plan with its margin; None when not even the longest does."""
        return next((fit.days for fit in self.rentals if fit.fits), None)

    @property
    def planned_cost(self) -> float | None:
        """The planned work and margin at the hourly price (what a rental billed by the hour would cost)."""
        return None if self.price_per_hour is None else self.needed_seconds / 3600 * self.price_per_hour

    def phase(self, key: str) -> Phase:
        """One phase by key."""
        return next(phase for phase in self.phases if phase.key == key)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "phases": [phase.to_dict() for phase in self.phases],
            "total_seconds": round(self.total_seconds, 1),
            "margin_share": self.margin_share,
            "margin_seconds": round(self.margin_seconds, 1),
            "needed_seconds": round(self.needed_seconds, 1),
            "rentals": [fit.to_dict() for fit in self.rentals],
            "shortest_rental_days": self.shortest_rental_days,
            "price_per_hour": self.price_per_hour,
            "planned_cost": None if self.planned_cost is None else round(self.planned_cost, 2),
            "estimated_figures": list(self.estimated_figures),
        }


def variant_key(name: str) -> str:
    """The phase key of a variant."""
    return f"{VARIANT}:{name}"


def _per_row(label: str, rows: int, figure: Figure) -> Part:
    return Part(label, rows * figure.value, figure.source)


def plan_phases(workload: Workload, figures: PlanFigures) -> list[Phase]:
    """Every phase in the method's order, each starting at 0 (`build_timeline` lays them end to end)."""
    evaluation = figures.eval_seconds_per_row
    rate = figures.train_examples_per_second
    checks = Part("checks before training", figures.preflight_seconds.value, figures.preflight_seconds.source)
    baseline = _per_row("baseline evaluation", workload.validation_rows, evaluation)
    phases = [Phase(INITIAL_CHECK, INITIAL_CHECK, "Initial check", (checks, baseline), 0.0)]
    for variant in workload.variants:
        training = Part("training", variant.train_rows * variant.epochs / rate.value, rate.source)
        parts = (training, _per_row("evaluation", workload.validation_rows, evaluation))
        label = f"Variant {variant.name}"
        phases.append(Phase(variant_key(variant.name), VARIANT, label, parts, 0.0, variant.name, variant.epochs))
    final = (
        _per_row("final evaluation", workload.validation_rows, evaluation),
        _per_row("sealed test", workload.test_rows, evaluation),
    )
    phases.append(Phase(FINAL_EVALUATION, FINAL_EVALUATION, "Final evaluation and sealed test", final, 0.0))
    reload, export = figures.reload_seconds, figures.export_seconds
    resume = (Part("reload a checkpoint", reload.value, reload.source),)
    phases.append(Phase(RESUME_MARGIN, RESUME_MARGIN, "Reload in a new process", resume, 0.0))
    phases.append(Phase(EXPORT, EXPORT, "Export", (Part("export", export.value, export.source),), 0.0))
    return phases


def build_timeline(
    workload: Workload,
    figures: PlanFigures,
    *,
    margin_share: float = DEFAULT_MARGIN_SHARE,
    price_per_hour: float | None = None,
    rental_days: Sequence[int] = RENTAL_DAYS,
) -> Timeline:
    """Lay the phases end to end and weigh them against each rental length."""
    phases: list[Phase] = []
    cursor = 0.0
    for planned in plan_phases(workload, figures):
        phase = replace(planned, start_s=cursor)
        phases.append(phase)
        cursor = phase.end_s
    fixed = sum(phase.seconds for phase in phases if phase.kind != VARIANT)
    variant_seconds = [phase.seconds for phase in phases if phase.kind == VARIANT]
    rentals = tuple(
        _fit(days, fixed, variant_seconds, margin_share, price_per_hour) for days in sorted(set(rental_days))
    )
    return Timeline(
        phases=tuple(phases),
        margin_share=margin_share,
        rentals=rentals,
        price_per_hour=price_per_hour,
        estimated_figures=tuple(figures.estimated_names()),
    )


def _fit(
    days: int, fixed: float, variant_seconds: Sequence[float], margin_share: float, price: float | None
) -> RentalFit:
    capacity = days * DAY_S
    needed = (fixed + sum(variant_seconds)) * (1 + margin_share)
    # The variants run in order: the first N whose running total, with every other phase and the margin, fits.
    count, used = 0, fixed
    if fixed * (1 + margin_share) <= capacity:
        while count < len(variant_seconds) and (used + variant_seconds[count]) * (1 + margin_share) <= capacity:
            used += variant_seconds[count]
            count += 1
    return RentalFit(
        days=days,
        fits=needed <= capacity,
        spare_seconds=capacity - needed,
        variants_that_fit=count,
        cost=None if price is None else days * 24 * price,
    )
