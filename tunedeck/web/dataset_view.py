"""What the dataset page shows, shaped for its template: reports, the token-length histogram, the loss mask.

The inspection report (tokens tagged trained or masked, token lengths) needs a
tokenizer, which the web layer never loads. The page renders an inspection a
worker or the CLI stored on the version, under `reports["inspection"]`: either
one `InspectionReport.to_dict()` or a mapping of base-model id to one, so the
page can offer the loss-mask view for each base model it was computed with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

HISTOGRAM_HEIGHT = 120
HISTOGRAM_BAR_WIDTH = 28
MAX_TOKENS_SHOWN = 600


@dataclass(frozen=True)
class HistogramBar:
    """One bar of the token-length histogram, in SVG coordinates."""

    x: int
    y: int
    height: int
    label: str
    count: int


def inspections(reports: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The stored inspection reports by base-model id (`""` when stored without one)."""
    stored = reports.get("inspection")
    if not isinstance(stored, dict):
        return {}
    if "examples" in stored:
        return {str(stored.get("base_model_id") or ""): stored}
    return {str(key): value for key, value in stored.items() if isinstance(value, dict) and "examples" in value}


def histogram_bars(report: dict[str, Any]) -> list[HistogramBar]:
    """The inspection's length histogram as SVG bars, scaled to the tallest bin."""
    bins = [b for b in (report.get("lengths") or {}).get("histogram") or [] if isinstance(b, dict)]
    tallest = max((int(b.get("count", 0)) for b in bins), default=0) or 1
    bars = []
    for i, b in enumerate(bins):
        count = int(b.get("count", 0))
        height = round(HISTOGRAM_HEIGHT * count / tallest)
        bars.append(
            HistogramBar(
                x=i * HISTOGRAM_BAR_WIDTH,
                y=HISTOGRAM_HEIGHT - height,
                height=height,
                label=f"{b.get('start', '?')}–{b.get('end', '?')}",
                count=count,
            )
        )
    return bars


def shown_tokens(example: dict[str, Any]) -> list[dict[str, Any]]:
    """The first tokens of an inspected example, or of one span of a preference example (cut for display only)."""
    tokens = example.get("tokens") or []
    return [t for t in tokens[:MAX_TOKENS_SHOWN] if isinstance(t, dict)]


def preview_cells(row: dict[str, Any]) -> str:
    """A canonical row as one line of JSON for the preview list."""
    return json.dumps(row, ensure_ascii=False)
