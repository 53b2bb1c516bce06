"""Loss curves of several runs overlaid in one PNG, for reports that must carry their plots inside.

matplotlib is imported inside the function and drawn on an Agg canvas bound to
its own `Figure`, never through pyplot: no global figure state, no display needed,
safe in a worker thread.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from io import BytesIO

Curve = Sequence[tuple[int, float]]
SERIES_TITLES = {"loss": "training loss", "eval_loss": "evaluation loss"}


def overlaid_curves_png(
    runs: Sequence[tuple[str, Mapping[str, Curve]]], series: Sequence[str] = ("loss", "eval_loss")
) -> bytes | None:
    """One panel per series with a line per run (same colour per run across panels); None without points."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown = [name for name in series if any(curves.get(name) for _, curves in runs)]
    if not shown:
        return None
    figure = Figure(figsize=(5.2 * len(shown), 3.6), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, len(shown), squeeze=False)[0]
    colours = [f"C{index % 10}" for index in range(len(runs))]
    for axis, name in zip(axes, shown, strict=True):
        for (label, curves), colour in zip(runs, colours, strict=True):
            points = [(step, value) for step, value in curves.get(name, []) if value == value]  # drop NaN
            if points:
                steps, values = zip(*points, strict=True)
                axis.plot(steps, values, label=label, color=colour, marker="." if len(points) < 30 else None)
        axis.set_title(SERIES_TITLES.get(name, name))
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    buffer = BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def png_data_uri(png: bytes) -> str:
    """A `data:` URI embedding the PNG, so the document needs no other file."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
