"""A `Comparison` as Markdown or as one self-contained HTML file (styles and plots inline).

Both renderings show the same sections in the same order: hypothesis and guards,
method warnings, variants with their config differences (each key's group, the
variant's note) and what was not compared alike (procedure flags), metrics with deltas, the
per-class and per-field tables, guard verdicts and the overlaid loss curves. The
HTML has no external asset at all (no stylesheet, script, font or image URL): the
plot is a base64 PNG, so the file can be mailed or archived as is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from html import escape
from typing import Any

from tunedeck.core.dataset_rights import describe_dataset_licence
from tunedeck.eval.config_groups import key_group
from tunedeck.eval.experiment_report import Comparison, MetricCell, VariantSummary
from tunedeck.eval.markdown_text import md_code, md_text
from tunedeck.eval.report_plots import overlaid_curves_png, png_data_uri

DASH = "—"
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def fmt(value: Any) -> str:
    """A number for a table cell: 4 decimals, or general form for large values; a dash for nothing."""
    if value is None:
        return DASH
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if value != value:
        return "NaN"
    return f"{value:.4g}" if abs(value) >= 1000 else f"{value:.4f}"


def fmt_delta(value: float | None) -> str:
    """A signed delta, or a dash."""
    return DASH if value is None else f"{value:+.4f}"


def config_value(value: Any) -> str:
    """A config value as compact JSON (so `null`, lists and strings read unambiguously)."""
    return json.dumps(value, ensure_ascii=False)


def _cell_text(cell: MetricCell | None, *, with_reference: bool) -> str:
    if cell is None or cell.value is None:
        return DASH
    parts = [f"Δbase {fmt_delta(cell.delta_baseline)}"]
    if with_reference:
        parts.append(f"Δref {fmt_delta(cell.delta_reference)}")
    return f"{fmt(cell.value)} ({', '.join(parts)})"


def _state_text(variant: VariantSummary) -> str:
    return variant.state + (f": {variant.reason}" if variant.reason else "")


def _label(variant: VariantSummary) -> str:
    return variant.name + (" (reference)" if variant.is_reference else "")


def _budget_text(budget: Mapping[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in budget.items() if value is not None) or DASH


VARIANT_COLUMNS = (
    "variant",
    "job",
    "state",
    "seed",
    "budget",
    "training data and licences",
    "config differences from the reference",
    "not compared alike",
)


def _data_text(variant: VariantSummary) -> str:
    """Each dataset the variant trained on, with the licence its owner recorded."""
    return (
        "; ".join(
            f"{data.get('role') or 'dataset'}: {data.get('name') or 'unnamed'}"
            + (f" v{data['version']}" if data.get("version") is not None else "")
            + f" (licence: {describe_dataset_licence(data.get('licence'))})"
            for data in variant.data
        )
        or DASH
    )


def _curves_png(comparison: Comparison) -> bytes | None:
    return overlaid_curves_png([(variant.name, variant.curves) for variant in comparison.variants])


def _md_row(cells: list[str]) -> str:
    # Cells arrive as Markdown (user text already through md_text); a pipe not yet escaped is ours.
    return "| " + " | ".join(UNESCAPED_PIPE.sub("\\|", cell).replace("\n", " ") for cell in cells) + " |"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [_md_row(header), _md_row(["---"] * len(header)), *(_md_row(row) for row in rows), ""]


def comparison_markdown(comparison: Comparison, *, embed_plot: bool = True) -> str:
    """The comparison as Markdown; the loss-curve plot is embedded as a data URI unless `embed_plot` is False."""
    c = comparison
    hypothesis = md_text(c.hypothesis) if c.hypothesis else DASH
    lines = [f"# Experiment {md_text(c.name)} (`{c.experiment_id}`)", "", f"**Hypothesis:** {hypothesis}", ""]
    reference = next((md_text(v.name) for v in c.variants if v.is_reference), None)
    lines += [f"**Reference variant:** {reference or 'none (no variant runs the reference config unchanged)'}", ""]
    if c.guard_specs:
        lines += ["**Must not degrade:** " + "; ".join(md_code(spec) for spec in c.guard_specs), ""]
    if c.warnings:
        lines += ["## Warnings", "", *(f"- {md_text(warning)}" for warning in c.warnings), ""]
    lines += ["## Variants", ""]
    lines += _md_table(
        list(VARIANT_COLUMNS),
        [
            [
                md_text(_label(v)),
                f"`{v.job_id}`",
                md_text(_state_text(v)),
                str(v.seed),
                _budget_text(v.budget),
                md_text(_data_text(v)),
                "; ".join(
                    f"{key_group(key)} **{md_text(key)}**: {md_text(config_value(ref))} → {md_text(config_value(val))}"
                    for key, (ref, val) in v.config_diff.items()
                )
                + (f" (note: {md_text(v.note)})" if v.note else "")
                or "none",
                "; ".join(f"**{md_text(flag.check)}**: {md_text(flag.message)}" for flag in v.procedure_flags)
                or "none",
            ]
            for v in c.variants
        ],
    )
    lines += [
        "## Metrics",
        "",
        "Final value, then its change against the variant's baseline (untrained model, "
        "same procedure) and against the reference variant.",
        "",
    ]
    baseline = c.baseline_metrics or {}
    rows = [["baseline (untrained)", "", *(fmt(baseline.get(name)) for name in c.metric_names)]]
    rows += [
        [
            md_text(_label(v)),
            v.state,
            *(_cell_text(v.metrics.get(name), with_reference=True) for name in c.metric_names),
        ]
        for v in c.variants
    ]
    lines += _md_table(["variant", "state", *(md_text(name) for name in c.metric_names)], rows)
    for title, names, group in (("Per class", c.class_names, "per_class"), ("Per field", c.field_names, "per_field")):
        if names:
            lines += [f"## {title}", ""]
            for stat, table in _stat_tables(c, names, group):
                lines += [f"### {stat}", ""]
                marked = [[md_text(row[0]), *row[1:]] for row in table]
                lines += _md_table([title.split()[1], *(md_text(v.name) for v in c.variants)], marked)
    guard_rows = [
        [md_text(v.name), md_code(r["guard"]), "pass" if r["passed"] else "**VIOLATED**", md_text(r["reason"])]
        for v in c.variants
        for r in v.guards
    ]
    if guard_rows:
        lines += ["## Guards", "", *_md_table(["variant", "guard", "verdict", "reason"], guard_rows)]
    lines += ["## Loss curves", ""]
    curves = [[md_text(row[0]), md_text(row[1]), *row[2:]] for row in _curve_rows(c)]
    lines += _md_table(["variant", "series", "points", "first", "last", "min"], curves)
    png = _curves_png(c) if embed_plot else None
    if png is not None:
        lines += [f"![overlaid loss curves]({png_data_uri(png)})", ""]
    return "\n".join(lines)


def _stat_tables(c: Comparison, names: list[str], group: str) -> list[tuple[str, list[list[str]]]]:
    stats = sorted(
        {stat for v in c.variants for cells in getattr(v, group).values() for stat in cells},
        key=lambda stat: ("f1", "present_rate", "exact_match", "precision", "recall").index(stat),
    )
    tables = []
    for stat in stats:
        rows = []
        for name in names:
            row = [name]
            for v in c.variants:
                cell = getattr(v, group).get(name, {}).get(stat)
                row.append(
                    DASH
                    if cell is None or cell.value is None
                    else f"{fmt(cell.value)} (base {fmt(cell.baseline)}, {fmt_delta(cell.delta_baseline)})"
                )
            rows.append(row)
        tables.append((stat, rows))
    return tables


def _curve_rows(c: Comparison) -> list[list[str]]:
    rows = []
    for v in c.variants:
        for series, points in v.curves.items():
            values = [value for _, value in points if value == value]
            rows.append(
                [
                    v.name,
                    series,
                    str(len(points)),
                    fmt(values[0] if values else None),
                    fmt(values[-1] if values else None),
                    fmt(min(values) if values else None),
                ]
            )
    return rows or [[DASH, DASH, "0", DASH, DASH, DASH]]


_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1d1d1f;max-width:80rem}
table{border-collapse:collapse;margin:0.5rem 0 1.5rem}th,td{border:1px solid #ccc;padding:0.3rem 0.6rem;
text-align:left;vertical-align:top;font-size:0.9rem}th{background:#f2f2f2}.better{color:#0a6b2d}.worse{color:#b00020}
.delta{font-size:0.8rem;color:#555}mark{background:#fff1a8}.state-failed,.state-cancelled{color:#b00020;font-weight:600}
.warn{background:#fff6e5;border-left:4px solid #e69500;padding:0.5rem 1rem}.violated{color:#b00020;font-weight:600}
img{max-width:100%}
"""


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{cell}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_cell(cell: MetricCell | None, *, with_reference: bool = True) -> str:
    if cell is None or cell.value is None:
        return DASH
    deltas = f"Δbase {fmt_delta(cell.delta_baseline)}"
    if with_reference:
        deltas += f", Δref {fmt_delta(cell.delta_reference)}"
    css = f' class="{cell.change}"' if cell.change in ("better", "worse") else ""
    return f'<span{css}>{fmt(cell.value)}</span><br><span class="delta">{escape(deltas)}</span>'


def comparison_html(comparison: Comparison) -> str:
    """The comparison as one self-contained HTML document (module docstring)."""
    c = comparison
    e = escape
    parts = [
        *_html_heading(c),
        *_html_variants(c),
        *_html_metrics(c),
        *_html_breakdowns(c),
        *_html_guards(c),
        *_html_curves(c),
    ]
    title = e(f"Experiment {c.name}")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_STYLE}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n"
    )


def _html_heading(comparison: Comparison) -> list[str]:
    """The title, hypothesis, guards and warnings."""
    c = comparison
    e = escape
    parts = [
        f"<h1>Experiment {e(c.name)} <small>({e(c.experiment_id)})</small></h1>",
        f"<p><strong>Hypothesis:</strong> {e(c.hypothesis or DASH)}</p>",
    ]
    if c.guard_specs:
        parts.append(
            "<p><strong>Must not degrade:</strong> " + "; ".join(f"<code>{e(s)}</code>" for s in c.guard_specs) + "</p>"
        )
    if c.warnings:
        parts.append(
            '<div class="warn"><strong>Warnings</strong><ul>'
            + "".join(f"<li>{e(w)}</li>" for w in c.warnings)
            + "</ul></div>"
        )
    return parts


def _html_variants(comparison: Comparison) -> list[str]:
    """The variants table: each job, its state, seed, budget, data, config changes and procedure flags."""
    c = comparison
    e = escape
    parts: list[str] = []
    parts.append("<h2>Variants</h2>")
    parts.append(
        _html_table(
            list(VARIANT_COLUMNS),
            [
                [
                    e(_label(v)),
                    f"<code>{e(v.job_id)}</code>",
                    f'<span class="state-{e(v.state)}">{e(_state_text(v))}</span>',
                    e(str(v.seed)),
                    e(_budget_text(v.budget)),
                    e(_data_text(v)),
                    "<br>".join(
                        f"{e(key_group(key))} "
                        f"<mark><strong>{e(key)}</strong>: {e(config_value(ref))} → {e(config_value(val))}</mark>"
                        for key, (ref, val) in v.config_diff.items()
                    )
                    + (f"<br><em>note: {e(v.note)}</em>" if v.note else "")
                    or "none",
                    "<br>".join(
                        f'<span class="violated">{e(flag.check)}</span>: {e(flag.message)}'
                        for flag in v.procedure_flags
                    )
                    or "none",
                ]
                for v in c.variants
            ],
        )
    )
    return parts


def _html_metrics(comparison: Comparison) -> list[str]:
    """The metrics table: the untrained baseline, then each variant."""
    c = comparison
    e = escape
    parts: list[str] = []
    parts.append(
        "<h2>Metrics</h2><p>Final value; Δbase against the variant's baseline (untrained model, same "
        "procedure), Δref against the reference variant.</p>"
    )
    baseline = c.baseline_metrics or {}
    rows = [["baseline (untrained)", "", *(fmt(baseline.get(name)) for name in c.metric_names)]]
    rows += [
        [e(_label(v)), e(v.state), *(_html_cell(v.metrics.get(name)) for name in c.metric_names)] for v in c.variants
    ]
    parts.append(_html_table(["variant", "state", *(e(n) for n in c.metric_names)], rows))
    return parts


def _html_breakdowns(comparison: Comparison) -> list[str]:
    """Per-class and per-field tables, one per statistic (none without classes or fields)."""
    c = comparison
    e = escape
    parts: list[str] = []
    for title, names, group in (("Per class", c.class_names, "per_class"), ("Per field", c.field_names, "per_field")):
        if not names:
            continue
        parts.append(f"<h2>{title}</h2>")
        for stat, _ in _stat_tables(c, names, group):
            table_rows = [
                [
                    e(name),
                    *(_html_cell(getattr(v, group).get(name, {}).get(stat), with_reference=False) for v in c.variants),
                ]
                for name in names
            ]
            parts.append(
                f"<h3>{e(stat)}</h3>" + _html_table([title.split()[1], *(e(v.name) for v in c.variants)], table_rows)
            )
    return parts


def _html_guards(comparison: Comparison) -> list[str]:
    """The guards table (nothing when no variant has guards)."""
    c = comparison
    e = escape
    parts: list[str] = []
    guard_rows = [
        [
            e(v.name),
            f"<code>{e(r['guard'])}</code>",
            "pass" if r["passed"] else '<span class="violated">VIOLATED</span>',
            e(r["reason"]),
        ]
        for v in c.variants
        for r in v.guards
    ]
    if guard_rows:
        parts.append("<h2>Guards</h2>" + _html_table(["variant", "guard", "verdict", "reason"], guard_rows))
    return parts


def _html_curves(comparison: Comparison) -> list[str]:
    """The overlaid loss curves image (when it can be drawn) and the curves table."""
    c = comparison
    e = escape
    parts: list[str] = []
    parts.append("<h2>Loss curves</h2>")
    png = _curves_png(c)
    if png is not None:
        parts.append(f'<img alt="overlaid loss curves" src="{png_data_uri(png)}">')
    parts.append(
        _html_table(
            ["variant", "series", "points", "first", "last", "min"],
            [[e(cell) for cell in row] for row in _curve_rows(c)],
        )
    )
    return parts
