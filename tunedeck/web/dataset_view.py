"""What the dataset page shows, shaped for its template: reports, the token-length histogram, the loss mask.

The inspection report (tokens tagged trained or masked, token lengths) needs a
tokenizer, which the web layer never loads. The page renders an inspection a
worker or the CLI stored on the version, under `reports["inspection"]`: either
one `InspectionReport.to_dict()` or a mapping of base-model id to one, so the
page can offer the loss-mask view for each base model it was computed with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from tunedeck.web.locales.catalogue import marked

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


PREVIEW_PAGE_ROWS = 20
CELL_CHARS = 160  # a table cell longer than this shows its start, and the whole value when expanded
BUBBLE_ROLES = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True)
class PreviewCell:
    """One table cell: the value as text, and its start when it is too long to show whole."""

    text: str
    short: str | None  # None: shown whole


@dataclass(frozen=True)
class PreviewMessage:
    """One chat bubble: who speaks, what they say, and what else the message carries (tool calls, names)."""

    role: str
    style: str  # the bubble's look: a known role, or `other`
    content: str
    extras: str  # tool calls, name and tool_call_id as JSON; empty when none
    context_only: bool  # an assistant message with weight 0: shown to the model, not trained


@dataclass(frozen=True)
class PreviewRow:
    """One preview row: its number in the file, its canonical JSON, and its cells or its messages."""

    number: int
    raw: str
    cells: list[PreviewCell]
    messages: list[PreviewMessage]


@dataclass(frozen=True)
class Preview:
    """One page of the preview, laid out as chat bubbles (conversational rows) or as a table."""

    layout: str  # "chat" or "table"
    columns: list[str]
    rows: list[PreviewRow]
    first: int
    last: int
    total: int  # rows in the version
    stored: int  # rows the preview keeps
    page: int
    pages: int


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _cell(value: Any) -> PreviewCell:
    text = _text(value)
    return PreviewCell(text, text[:CELL_CHARS].rstrip() if len(text) > CELL_CHARS else None)


def _message(message: Any) -> PreviewMessage:
    if not isinstance(message, dict):
        return PreviewMessage("message", "other", _text(message), "", False)
    role = str(message.get("role") or "message")
    content = message.get("content")
    extras = {key: message[key] for key in ("name", "tool_call_id", "tool_calls") if message.get(key) is not None}
    return PreviewMessage(
        role=role,
        style=role if role in BUBBLE_ROLES else "other",
        content="" if content is None else _text(content),
        extras=json.dumps(extras, ensure_ascii=False, indent=1) if extras else "",
        context_only=role == "assistant" and message.get("weight") == 0,
    )


def is_conversational(rows: list[dict[str, Any]]) -> bool:
    """Whether every row is a conversation (a `messages` list): shown as chat bubbles, else as a table."""
    return bool(rows) and all(isinstance(row.get("messages"), list) for row in rows)


def shape_preview(rows: list[dict[str, Any]], total: int, page: int) -> Preview:
    """Page `page` (from 1; past the end: the last) of the stored preview rows, as bubbles or a table.

    Conversations become one bubble per message; other rows become a table whose columns are
    the rows' fields in the order they first appear. Every row keeps its canonical JSON.
    """
    pages = max(1, -(-len(rows) // PREVIEW_PAGE_ROWS))
    page = min(max(page, 1), pages)
    start = (page - 1) * PREVIEW_PAGE_ROWS
    shown = rows[start : start + PREVIEW_PAGE_ROWS]
    chat = is_conversational(rows)
    columns: list[str] = []
    if not chat:
        for row in shown:
            columns.extend(key for key in row if key not in columns)
    out = [
        PreviewRow(
            number=start + offset + 1,
            raw=json.dumps(row, ensure_ascii=False, indent=2),
            cells=[] if chat else [_cell(row[key]) if key in row else PreviewCell("", None) for key in columns],
            messages=[_message(m) for m in row["messages"]] if chat else [],
        )
        for offset, row in enumerate(shown)
    ]
    return Preview(
        layout="chat" if chat else "table",
        columns=columns,
        rows=out,
        first=start + 1 if shown else 0,
        last=start + len(shown),
        total=total,
        stored=len(rows),
        page=page,
        pages=pages,
    )


MAX_REFUSED_ROWS_NAMED = 10
# What training would do, by (whether the mode drops rows, whether a chat template set the masks).
REFUSAL_HEADS = {
    (False, False): marked(
        "With max_length {max_length}, truncation {mode}, training would refuse {refused} of {total} rows: {reasons}."
    ),
    (False, True): marked(
        "With max_length {max_length}, truncation {mode}, chat template masks from {template}, training would refuse {refused} of {total} rows: {reasons}."  # noqa: E501
    ),
    (True, False): marked(
        "With max_length {max_length}, truncation {mode}, training would leave out {refused} of {total} rows: {reasons}."  # noqa: E501
    ),
    (True, True): marked(
        "With max_length {max_length}, truncation {mode}, chat template masks from {template}, training would leave out {refused} of {total} rows: {reasons}."  # noqa: E501
    ),
}


def refusal_warning(report: dict[str, Any], translate: Callable[..., Markup]) -> Markup | None:
    """What training with the inspection's settings would do to rows left without a trained token, or None.

    The counts are the inspection's truncation report: rows with no answer at all, and rows whose
    whole answer truncation at `max_length` cuts off. Under the `refuse` mode the job stops on them;
    under `drop` they are left out. The warning is in `translate`'s language (the page's `_`).
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
    template = report.get("chat_mask_method")
    reasons = []
    if cut_off:
        reasons.append(
            translate(
                marked("{count} lose their whole answer to truncation at max_length {max_length}"),
                count=cut_off,
                max_length=max_length,
            )
        )
    if no_answer:
        reasons.append(
            translate(marked("{count} have no trained token even before truncation (an empty answer)"), count=no_answer)
        )
    text = translate(
        REFUSAL_HEADS[(mode == "drop", bool(template))],
        max_length=max_length,
        mode=mode,
        template=template,
        refused=refused,
        total=int(truncation.get("total") or 0),
        reasons=Markup("; ").join(reasons),
    )
    rows = [int(i) + 1 for i in (truncation.get("refused_rows") or [])[:MAX_REFUSED_ROWS_NAMED]]
    if rows:
        named = marked("Rows {rows} and more.") if refused > len(rows) else marked("Rows {rows}.")
        text += Markup(" ") + translate(named, rows=", ".join(map(str, rows)))
    if cut_off:
        text += Markup(" ") + translate(
            marked("Raise max_length, shorten the prompts, or set truncation to truncate_prompt or drop.")
        )
    return text
