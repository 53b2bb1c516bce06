"""What the compare-runs page shows: the chosen jobs' config differences, final metrics and charted series.

The differences and final metrics come from the experiment comparison
(`tunedeck.eval.experiment_report`), with the first chosen job as the
reference: a key left out of one job's config and written out as its default
in another's is the same value there, and only keys whose effective value
differs between the jobs are listed. The curves are not embedded: the page's
script reads each job's series from the metrics API, downsampled on the server.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.api.context import ApiContext
from tunedeck.eval.config_groups import key_group
from tunedeck.eval.experiment_report import Comparison, ExperimentData, build_comparison
from tunedeck.service.plans.experiment_sources import variant_run
from tunedeck.store.access import Actor
from tunedeck.store.job_progress import progress_for
from tunedeck.store.models import Job
from tunedeck.web.job_view import steps_per_epoch
from tunedeck.web.locales.catalogue import Message, marked

MIN_JOBS = 2
MAX_JOBS = 10
# Series that are not compared as curves: a running count, and the x-axis choice itself.
NOT_CHARTED = frozenset({"epoch", "tokens_seen"})
# The charts come in this order, then every other series by name.
CHART_ORDER = ("loss", "eval_loss", "learning_rate", "grad_norm", "tokens_per_second")
# Final values read from the logged curves, for runs without a final evaluation.
LAST_LOGGED = ("loss", "eval_loss")


class CompareRequestError(ValueError):
    """The jobs asked for cannot be compared (too few, too many); the message says what is expected."""


def parse_job_ids(values: Iterable[str]) -> list[str]:
    """The job ids of `?ids=a,b,c` (or `?ids=a&ids=b`), in order, each once; between MIN_JOBS and MAX_JOBS."""
    ids = list(dict.fromkeys(part.strip() for value in values for part in value.split(",") if part.strip()))
    if not MIN_JOBS <= len(ids) <= MAX_JOBS:
        raise CompareRequestError(f"ids: choose between {MIN_JOBS} and {MAX_JOBS} jobs to compare (got {len(ids)}).")
    return ids


def compare_link_ids(job_ids: Sequence[str]) -> list[str]:
    """The jobs a "Compare variants" link opens: the first MAX_JOBS, none when fewer than MIN_JOBS."""
    return list(job_ids[:MAX_JOBS]) if len(job_ids) >= MIN_JOBS else []


@dataclass(frozen=True)
class ConfigRow:
    """One config key whose effective value differs between the jobs: its group and each job's value."""

    key: str
    group: str
    values: list[str | None]  # None: not set (the page says so in its language)


@dataclass(frozen=True)
class MetricRow:
    """One final metric: each job's value (None where the job has none)."""

    name: Message  # the metric and where its value comes from
    values: list[float | None]


@dataclass(frozen=True)
class ComparePage:
    """The compare-runs page: its jobs (first one the reference), differences, final metrics, charts."""

    jobs: list[Job]
    config_rows: list[ConfigRow]
    metric_rows: list[MetricRow]
    chart_names: list[str]
    client_jobs: list[dict[str, Any]]


def shown_value(value: Any) -> str:
    """A config value as the table writes it: JSON-like, `not set` for None."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ", ".join(shown_value(item) for item in value) or "[]"
    return str(value)


def config_rows(comparison: Comparison) -> list[ConfigRow]:
    """Every key that differs from the reference (the first job) in any job, with every job's value."""
    variants = comparison.variants
    reference_values: dict[str, Any] = {}
    for variant in variants:
        for key, (reference, _) in variant.config_diff.items():
            reference_values.setdefault(key, reference)
    rows = []
    for key in sorted(reference_values):
        values = [
            variant.config_diff[key][1] if key in variant.config_diff else reference_values[key] for variant in variants
        ]
        rows.append(
            ConfigRow(key=key, group=key_group(key), values=[None if v is None else shown_value(v) for v in values])
        )
    return rows


def _last_finite(points: Sequence[tuple[int, float]]) -> float | None:
    return next((value for _, value in reversed(points) if value is not None and math.isfinite(value)), None)


def metric_rows(comparison: Comparison) -> list[MetricRow]:
    """The last logged training and evaluation loss, then every final evaluation metric, one value per job."""
    rows = [
        MetricRow(
            Message(marked("{name} (last logged)"), {"name": name}),
            [_last_finite(v.curves.get(name) or []) for v in comparison.variants],
        )
        for name in LAST_LOGGED
    ]
    rows += [
        MetricRow(
            Message(marked("{name} (final evaluation)"), {"name": name}),
            [v.metrics[name].value for v in comparison.variants],
        )
        for name in comparison.metric_names
    ]
    return [row for row in rows if any(value is not None for value in row.values)]


def chart_names(names: Iterable[str]) -> list[str]:
    """The series to chart, known ones first (loss, evaluation loss...), then the rest by name."""
    wanted = set(names) - NOT_CHARTED
    known = [name for name in CHART_ORDER if name in wanted]
    return known + sorted(wanted - set(known))


def compare_page(context: ApiContext, viewer: Actor, jobs: Sequence[Job]) -> ComparePage:
    """Gather the page for `jobs` (read with `viewer`'s scope, so every id is theirs to see)."""
    store, artifacts = context.jobs, context.artifacts
    variants = [variant_run(store, artifacts, viewer, job) for job in jobs]
    comparison = build_comparison(
        ExperimentData(
            experiment_id="",
            name="",
            hypothesis="",
            reference_config=dict(variants[0].config),
            variants=variants,
            reference_job_id=jobs[0].id,
        )
    )
    progress = progress_for(store, list(jobs))
    names = {name for job in jobs for name in store.telemetry.metric_names(viewer, job.id)}
    return ComparePage(
        jobs=list(jobs),
        config_rows=config_rows(comparison),
        metric_rows=metric_rows(comparison),
        chart_names=chart_names(names),
        client_jobs=[
            {
                "id": job.id,
                "name": job.name,
                "steps_per_epoch": steps_per_epoch(job.config, progress[job.id].total_steps),
            }
            for job in jobs
        ],
    )
