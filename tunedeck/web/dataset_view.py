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


MAX_REFUSED_ROWS_NAMED = 10


def refusal_warning(report: dict[str, Any]) -> str | None:
    """What training with the inspection's settings would do to rows left without a trained token, or None.

    The counts are the inspection's truncation report: rows with no answer at all, and rows whose
    whole answer truncation at `max_length` cuts off. Under the `refuse` mode the job stops on them;
    under `drop` they are left out.
    """
    truncation = report.get("truncation")
    if not isinstance(truncation, dict):
        return None
    no_answer = int(truncation.get("no_answer") or 0)
    cut_off = int(truncation.get("lost_all_answer") or 0)
    refused = no_answer + cut_off
    if not refused:
        return None
    mode = str(truncation.get("truncation") or "refuse")
    max_length = report.get("max_length")
    total = int(truncation.get("total") or 0)
    template = report.get("chat_mask_method")
    settings = f"max_length {max_length}, truncation {mode}"
    if template:
        settings += f", chat template masks from {template}"
    outcome = "would leave out" if mode == "drop" else "would refuse"
    reasons = []
    if cut_off:
        reasons.append(f"{cut_off} lose their whole answer to truncation at max_length {max_length}")
    if no_answer:
        reasons.append(f"{no_answer} have no trained token even before truncation (an empty answer)")
    rows = [int(i) + 1 for i in (truncation.get("refused_rows") or [])[:MAX_REFUSED_ROWS_NAMED]]
    named = f" Rows {', '.join(map(str, rows))}" + (" and more." if refused > len(rows) else ".") if rows else ""
    fix = " Raise max_length, shorten the prompts, or set truncation to truncate_prompt or drop." if cut_off else ""
    return f"With {settings}, training {outcome} {refused} of {total} rows: {'; '.join(reasons)}.{named}{fix}"
