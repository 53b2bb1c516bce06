"""What the experiment page draws from a comparison: the per-class / per-field tables and the overlaid curves.

The comparison itself comes from `tunedeck.eval.experiment_report` (its JSON-ready
form); this module only reshapes it for the template. The loss curves become
SVG polylines computed here, so the page needs no script and no image library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PLOT_WIDTH = 640
PLOT_HEIGHT = 240
PLOT_PAD = 36
MAX_CURVE_POINTS = 400  # per polyline: the page stays light whatever the runs' length
PALETTE = ("#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
# Order of the statistic tables, as the rendered reports show them.
STAT_ORDER = ("f1", "precision", "recall", "present_rate", "exact_match")


@dataclass(frozen=True)
class StatTable:
    """One statistic (f1, present_rate...) of every class or field, one column per variant."""

    stat: str
    rows: list[tuple[str, list[dict[str, Any] | None]]]  # (class or field name, one cell per variant)


@dataclass(frozen=True)
class CurveLine:
    """One variant's series, as SVG polyline points in the plot's coordinates."""

    label: str
    series: str
    color: str
    dashed: bool
    points: str
    count: int


@dataclass(frozen=True)
class CurvePlot:
    """The overlaid curves of every variant, with the ranges the axes show."""

    width: int
    height: int
    pad: int
    lines: list[CurveLine]
    min_step: int
    max_step: int
    min_value: float
    max_value: float


def stat_tables(comparison: dict[str, Any], group: str) -> list[StatTable]:
    """`per_class` or `per_field` of every variant as one table per statistic (rows: class or field names)."""
    names = comparison["class_names"] if group == "per_class" else comparison["field_names"]
    variants = comparison["variants"]
    stats = {stat for v in variants for cells in v[group].values() for stat in cells}
    tables = []
    for stat in sorted(stats, key=lambda s: (STAT_ORDER.index(s) if s in STAT_ORDER else len(STAT_ORDER), s)):
        rows = [(name, [v[group].get(name, {}).get(stat) for v in variants]) for name in names]
        tables.append(StatTable(stat=stat, rows=rows))
    return tables


def _thin(points: Sequence[Sequence[Any]], limit: int) -> list[tuple[int, float]]:
    finite = [(int(p[0]), float(p[1])) for p in points if p[1] is not None and math.isfinite(float(p[1]))]
    if len(finite) <= limit:
        return finite
    stride = len(finite) / limit
    kept = [finite[int(i * stride)] for i in range(limit - 1)]
    return [*kept, finite[-1]]


def curve_plot(comparison: dict[str, Any]) -> CurvePlot | None:
    """Every variant's `loss` (solid) and `eval_loss` (dashed) on shared axes; None when no variant has points."""
    series: list[tuple[str, str, str, list[tuple[int, float]]]] = []
    for index, variant in enumerate(comparison["variants"]):
        color = PALETTE[index % len(PALETTE)]
        for name in ("loss", "eval_loss"):
            points = _thin(variant["curves"].get(name) or [], MAX_CURVE_POINTS)
            if points:
                series.append((str(variant["name"]), name, color, points))
    if not series:
        return None
    steps = [step for *_, points in series for step, _ in points]
    values = [value for *_, points in series for _, value in points]
    low_step, high_step = min(steps), max(steps)
    low, high = min(values), max(values)
    step_span = max(high_step - low_step, 1)
    value_span = high - low or 1.0
    inner_w, inner_h = PLOT_WIDTH - 2 * PLOT_PAD, PLOT_HEIGHT - 2 * PLOT_PAD

    def xy(step: int, value: float) -> str:
        x = PLOT_PAD + (step - low_step) / step_span * inner_w
        y = PLOT_PAD + (high - value) / value_span * inner_h
        return f"{x:.1f},{y:.1f}"

    lines = [
        CurveLine(
            label=label,
            series=name,
            color=color,
            dashed=name == "eval_loss",
            points=" ".join(xy(step, value) for step, value in points),
            count=len(points),
        )
        for label, name, color, points in series
    ]
    return CurvePlot(PLOT_WIDTH, PLOT_HEIGHT, PLOT_PAD, lines, low_step, high_step, low, high)
