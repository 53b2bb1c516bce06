"""What the plan page draws: the phases as horizontal bars over days, the margin, the rental lengths, the projections.

Plain geometry for the template's server-rendered SVG (no script, nothing fetched):
one row per phase from the plan's timeline, one for the margin, a line at each rental
length the chart spans, and once the rental started, a mark at each phase's projected end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tunedeck.planning.durations import rental_duration
from tunedeck.planning.timeline import DAY_S, RENTAL_DAYS
from tunedeck.web.locales.catalogue import Message, marked

WIDTH = 900
LABEL_W = 230
RIGHT_PAD = 24
TOP = 34
ROW_H = 26
BAR_H = 16
# The words of a plan's data that the plan page translates where it shows them (`_(seen.status)`):
# a phase's status once the rental started, and where a figure or a part's duration comes from.
PLAN_WORDS = (
    marked("done"), marked("running"), marked("paused"), marked("waiting"), marked("measured"), marked("estimated"),
)
SOURCE_TITLES = {
    "measured": marked("{phase}: {duration} (measured)"),
    "estimated": marked("{phase}: {duration} (estimated)"),
}


@dataclass(frozen=True)
class Bar:
    """One row: a phase (or the margin) and where it is drawn."""

    label: str | Message  # a phase's label as the plan names it, or the margin's
    x: float
    y: float
    width: float
    kind: str  # measured | estimated | margin
    title: Message
    marker_x: float | None = None  # the projected end, once the rental started
    late: bool = False


@dataclass(frozen=True)
class Tick:
    """A vertical line with its label: a day, or a rental's end."""

    x: float
    label: Message


@dataclass
class PlanChart:
    """The SVG's size, rows and lines."""

    width: int
    height: int
    label_w: int
    top: int
    bar_h: int
    days: int
    bars: list[Bar] = field(default_factory=list)
    day_ticks: list[Tick] = field(default_factory=list)
    rental_lines: list[Tick] = field(default_factory=list)


def _offset(moment: str, start: datetime) -> float:
    return (datetime.fromisoformat(moment) - start).total_seconds()


def plan_chart(plan: dict[str, Any]) -> PlanChart:
    """The chart of a plan (`PlanOut` as JSON): bars over the days the plan, its rental and its projections span."""
    timeline = plan["timeline"]
    tracking = plan.get("tracking")
    start = datetime.fromisoformat(tracking["started_at"]) if tracking else None
    projected = {phase["key"]: phase for phase in tracking["phases"]} if tracking else {}
    span = float(timeline["needed_seconds"])
    if tracking and start is not None:
        span = max(span, tracking["rental_days"] * DAY_S, _offset(tracking["projected_end"], start))
    days = max(1, math.ceil(span / DAY_S))
    plot_w = WIDTH - LABEL_W - RIGHT_PAD
    scale = plot_w / (days * DAY_S)
    rows = len(timeline["phases"]) + 1
    chart = PlanChart(WIDTH, TOP + rows * ROW_H + 12, LABEL_W, TOP, BAR_H, days)
    step = 1 if days <= 10 else 5 if days <= 40 else 10
    chart.day_ticks = [
        Tick(LABEL_W + d * DAY_S * scale, Message(marked("day {day}"), {"day": d})) for d in range(0, days + 1, step)
    ]
    chart.rental_lines = [
        Tick(LABEL_W + rental * DAY_S * scale, Message(marked("{days}-day rental"), {"days": rental}))
        for rental in RENTAL_DAYS
        if rental <= days
    ]
    for index, phase in enumerate(timeline["phases"]):
        seen = projected.get(phase["key"])
        marker = None
        if seen is not None and start is not None:
            marker = LABEL_W + max(0.0, _offset(seen["projected_end"], start)) * scale
        source = "estimated" if phase["estimated"] else "measured"
        chart.bars.append(
            Bar(
                label=phase["label"],
                x=LABEL_W + phase["start_s"] * scale,
                y=TOP + index * ROW_H,
                width=max(1.0, phase["seconds"] * scale),
                kind=source,
                title=Message(
                    SOURCE_TITLES[source], {"phase": phase["label"], "duration": rental_duration(phase["seconds"])}
                ),
                marker_x=marker,
                late=bool(seen and seen["late"]),
            )
        )
    margin = float(timeline["margin_seconds"])
    chart.bars.append(
        Bar(
            label=Message(marked("Margin ({share})"), {"share": f"{timeline['margin_share']:.0%}"}),
            x=LABEL_W + float(timeline["total_seconds"]) * scale,
            y=TOP + (rows - 1) * ROW_H,
            width=max(1.0, margin * scale),
            kind="margin",
            title=Message(marked("margin: {duration}"), {"duration": rental_duration(margin)}),
        )
    )
    return chart
