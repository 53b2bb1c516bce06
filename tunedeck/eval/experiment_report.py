"""Comparing the variants of an experiment: plain data in, one comparison out (the experiment method).

An experiment states a hypothesis, a reference config and its variants (jobs).
`build_comparison` takes everything as plain data (no database, no files), so the
CLI, the API and the dashboard feed it from the store and render the same thing:

- variants × metrics, each final value with its delta against the variant's own
  baseline (the untrained model, same procedure) and against the reference variant;
- per-class and per-field tables with the same deltas;
- loss curves of every variant, for one overlaid plot;
- config differences: only the keys whose effective value differs from the reference
  config (`config_groups`), each with its group, and a warning when a variant changes
  more than one group without a note saying why;
- guard verdicts per variant;
- procedure flags where the method is broken (`procedure_flags`): variants evaluated
  on other rows, with another procedure, chat template or decoding settings, another
  seed, another budget or other training data than the reference.

Failed, cancelled and invalid variants stay in the comparison with their state and
reason; their metrics are simply absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedeck.core.errors import ConfigError
from tunedeck.core.metric_direction import lower_is_better
from tunedeck.eval.config_groups import changed_groups, effective_config, effective_differences, key_group
from tunedeck.eval.guards import Guard, evaluate_guards
from tunedeck.eval.procedure_flags import ProcedureFlag, procedure_flags

# Experiment-level guards may be stored beside the reference config under this key.
GUARDS_KEY = "guards"
# Why a variant changes what it changes, by job id, stored beside the reference config under this key.
NOTES_KEY = "variant_notes"
_NOT_CONFIG = frozenset({GUARDS_KEY, NOTES_KEY})
_NOT_COMPARED = frozenset({"num_examples"})
CLASS_STATS = ("f1", "precision", "recall")
FIELD_STATS = ("present_rate", "exact_match")
Curve = list[tuple[int, float]]


@dataclass
class VariantRun:
    """One variant (job) of an experiment, as plain data.

    `baseline` and `final` are evaluation documents (`baseline_eval.json` /
    `final_eval.json`: `metrics` and `procedure_sha256`) or None when missing.
    `budget` holds what bounds the training (epochs, total_steps, global_step).
    `data` lists the dataset manifests used (role, name, sha256, rows).
    `curves` maps a series name (`loss`, `eval_loss`) to (step, value) points.
    `derived` and `model` are what the run recorded beside its config (`config.json`):
    the resolved precision, the chat template's hash. `note` says why the variant
    changes what it changes.
    """

    job_id: str
    name: str
    state: str
    config: dict[str, Any]
    reason: str | None = None
    budget: dict[str, Any] = field(default_factory=dict)
    data: list[dict[str, Any]] = field(default_factory=list)
    baseline: dict[str, Any] | None = None
    final: dict[str, Any] | None = None
    curves: dict[str, Curve] = field(default_factory=dict)
    derived: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def seed(self) -> Any:
        """The training seed of this variant."""
        return self.config.get("seed")


@dataclass
class ExperimentData:
    """An experiment and its variants, as the store holds them."""

    experiment_id: str
    name: str
    hypothesis: str
    reference_config: dict[str, Any]
    variants: list[VariantRun]
    guards: list[Guard] = field(default_factory=list)
    reference_job_id: str | None = None


@dataclass(frozen=True)
class MetricCell:
    """A final value with its baseline, and its deltas against the baseline and the reference."""

    value: float | None
    baseline: float | None
    delta_baseline: float | None
    delta_reference: float | None
    change: str  # "better", "worse", "same" or "" (nothing to compare)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass
class VariantSummary:
    """One variant in the comparison."""

    job_id: str
    name: str
    state: str
    reason: str | None
    is_reference: bool
    seed: Any
    budget: dict[str, Any]
    data: list[dict[str, Any]]
    config_diff: dict[str, tuple[Any, Any]]  # key -> (reference value, this variant's value)
    changed_groups: list[str]
    note: str
    procedure_flags: list[ProcedureFlag]
    procedure_sha256: str | None
    metrics: dict[str, MetricCell]
    per_class: dict[str, dict[str, MetricCell]]
    per_field: dict[str, dict[str, MetricCell]]
    guards: list[dict[str, Any]]
    curves: dict[str, Curve]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "job_id": self.job_id,
            "name": self.name,
            "state": self.state,
            "reason": self.reason,
            "is_reference": self.is_reference,
            "seed": self.seed,
            "budget": self.budget,
            "data": self.data,
            "config_diff": {
                key: {"reference": ref, "variant": val, "group": key_group(key)}
                for key, (ref, val) in self.config_diff.items()
            },
            "changed_groups": self.changed_groups,
            "note": self.note,
            "procedure_flags": [flag.to_dict() for flag in self.procedure_flags],
            "procedure_sha256": self.procedure_sha256,
            "metrics": {name: cell.to_dict() for name, cell in self.metrics.items()},
            "per_class": _table_dict(self.per_class),
            "per_field": _table_dict(self.per_field),
            "guards": self.guards,
            "curves": {name: [list(point) for point in points] for name, points in self.curves.items()},
        }


@dataclass
class Comparison:
    """Every variant of an experiment side by side; render with `comparison_render`."""

    experiment_id: str
    name: str
    hypothesis: str
    reference_config: dict[str, Any]
    reference_job_id: str | None
    baseline_metrics: dict[str, Any] | None
    metric_names: list[str]
    class_names: list[str]
    field_names: list[str]
    guard_specs: list[str]
    variants: list[VariantSummary]
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the API returns)."""
        return {
            "experiment_id": self.experiment_id,
            "name": self.name,
            "hypothesis": self.hypothesis,
            "reference_config": self.reference_config,
            "reference_job_id": self.reference_job_id,
            "baseline_metrics": self.baseline_metrics,
            "metric_names": self.metric_names,
            "class_names": self.class_names,
            "field_names": self.field_names,
            "guards": self.guard_specs,
            "variants": [variant.to_dict() for variant in self.variants],
            "warnings": self.warnings,
        }


def _table_dict(table: Mapping[str, Mapping[str, MetricCell]]) -> dict[str, Any]:
    return {row: {stat: cell.to_dict() for stat, cell in cells.items()} for row, cells in table.items()}


def resolved_reference_config(reference_config: Mapping[str, Any]) -> dict[str, Any]:
    """The reference config with every default filled in, so it compares key by key with a job's config.

    Guards and notes stored beside it are not config. A reference that is not a valid
    config is compared as written.
    """
    from tunedeck.config.loading import validate_config

    raw = {key: value for key, value in reference_config.items() if key not in _NOT_CONFIG}
    try:
        return validate_config(raw).to_json_dict()
    except ConfigError:
        return raw


def variant_notes(reference_config: Mapping[str, Any]) -> dict[str, str]:
    """The notes stored beside a reference config, by job id."""
    notes = reference_config.get(NOTES_KEY)
    return {str(k): str(v) for k, v in notes.items()} if isinstance(notes, Mapping) else {}


def config_differences(reference: Mapping[str, Any], variant: VariantRun) -> dict[str, tuple[Any, Any]]:
    """Keys whose effective value differs between the (filled-in) reference config and a variant's, sorted.

    Both sides are compared as `config_groups.effective_config` reads them, the
    reference's automatic settings resolved as they were on the variant's machine.
    """
    config = resolved_reference_config(variant.config)
    return effective_differences(
        effective_config(reference, variant.derived), effective_config(config, variant.derived)
    )


def scalar_metrics(metrics: Mapping[str, Any] | None) -> dict[str, float]:
    """The top-level numeric metrics (eval_loss, accuracy, json_valid_rate...), without counts."""
    if not metrics:
        return {}
    return {
        key: float(value)
        for key, value in metrics.items()
        if key not in _NOT_COMPARED and isinstance(value, int | float) and not isinstance(value, bool)
    }


def metric_change(name: str, value: float | None, baseline: float | None) -> str:
    """Whether `value` is better, worse or the same as `baseline` for metric `name`."""
    if value is None or baseline is None:
        return ""
    if abs(value - baseline) <= 1e-9:
        return "same"
    improved = value < baseline if lower_is_better(name) else value > baseline
    return "better" if improved else "worse"


def _cell(name: str, value: float | None, baseline: float | None, reference: float | None) -> MetricCell:
    return MetricCell(
        value=value,
        baseline=baseline,
        delta_baseline=None if value is None or baseline is None else value - baseline,
        delta_reference=None if value is None or reference is None else value - reference,
        change=metric_change(name, value, baseline),
    )


def _metrics_of(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not document:
        return None
    metrics = document.get("metrics")
    return dict(metrics) if isinstance(metrics, Mapping) else None


def _nested(metrics: Mapping[str, Any] | None, group: str, stats: Sequence[str]) -> dict[str, dict[str, float]]:
    """`per_class` or `fields` of a metrics mapping, as row -> stat -> value."""
    table = (metrics or {}).get(group)
    if not isinstance(table, Mapping):
        return {}
    return {
        str(row): {stat: float(values[stat]) for stat in stats if isinstance(values.get(stat), int | float)}
        for row, values in table.items()
        if isinstance(values, Mapping)
    }


def _pick_reference(data: ExperimentData, reference: Mapping[str, Any]) -> VariantRun | None:
    if data.reference_job_id is not None:
        return next((v for v in data.variants if v.job_id == data.reference_job_id), None)
    differences = [(v, config_differences(reference, v)) for v in data.variants]
    # Unchanged, else changed only in how it ran (runtime keys), never in what it learned.
    exact = [v for v, found in differences if not found] or [v for v, found in differences if not changed_groups(found)]
    return exact[0] if exact else None


def build_comparison(data: ExperimentData) -> Comparison:
    """Compare every variant of `data` against its baseline and the reference (module docstring)."""
    reference_config = resolved_reference_config(data.reference_config)
    reference = _pick_reference(data, reference_config)
    reference_final = _metrics_of(reference.final) if reference else None
    shared_baseline = _metrics_of(reference.baseline) if reference else None
    if shared_baseline is None:
        shared_baseline = next((_metrics_of(v.baseline) for v in data.variants if v.baseline), None)
    metric_names = _ordered_union(scalar_metrics(_metrics_of(v.final)) for v in data.variants)
    class_names = _ordered_union(_nested(_metrics_of(v.final), "per_class", CLASS_STATS) for v in data.variants)
    field_names = _ordered_union(_nested(_metrics_of(v.final), "fields", FIELD_STATS) for v in data.variants)
    anchor = _anchor(data.variants, reference)
    summaries = [
        _summarise(
            variant, variant is reference, reference_config, reference_final, shared_baseline, data.guards, metric_names
        )
        for variant in data.variants
    ]
    for summary, variant in zip(summaries, data.variants, strict=True):
        summary.procedure_flags = [] if anchor is None or variant is anchor else procedure_flags(anchor, variant)
    return Comparison(
        experiment_id=data.experiment_id,
        name=data.name,
        hypothesis=data.hypothesis,
        reference_config=reference_config,
        reference_job_id=reference.job_id if reference else None,
        baseline_metrics=shared_baseline,
        metric_names=metric_names,
        class_names=class_names,
        field_names=field_names,
        guard_specs=[str(guard) for guard in data.guards],
        variants=summaries,
        warnings=method_warnings(data.variants, reference, summaries),
    )


def _ordered_union(mappings: Any) -> list[str]:
    seen: dict[str, None] = {}
    for mapping in mappings:
        for key in mapping:
            seen.setdefault(key, None)
    return list(seen)


def _summarise(
    variant: VariantRun,
    is_reference: bool,
    reference_config: Mapping[str, Any],
    reference_final: Mapping[str, Any] | None,
    shared_baseline: Mapping[str, Any] | None,
    guards: Sequence[Guard],
    metric_names: Sequence[str],
) -> VariantSummary:
    final = _metrics_of(variant.final)
    baseline = _metrics_of(variant.baseline) or shared_baseline
    values, base, ref = scalar_metrics(final), scalar_metrics(baseline), scalar_metrics(reference_final)
    metrics = {name: _cell(name, values.get(name), base.get(name), ref.get(name)) for name in metric_names}
    tables = {}
    for group, stats in (("per_class", CLASS_STATS), ("fields", FIELD_STATS)):
        own, before, against = (
            _nested(final, group, stats),
            _nested(baseline, group, stats),
            _nested(reference_final, group, stats),
        )
        tables[group] = {
            row: {
                stat: _cell(stat, cells.get(stat), before.get(row, {}).get(stat), against.get(row, {}).get(stat))
                for stat in stats
            }
            for row, cells in own.items()
        }
    verdicts = [result.to_dict() for result in evaluate_guards(guards, final, baseline)] if final else []
    differences = config_differences(reference_config, variant)
    return VariantSummary(
        job_id=variant.job_id,
        name=variant.name,
        state=variant.state,
        reason=variant.reason,
        is_reference=is_reference,
        seed=variant.seed,
        budget=dict(variant.budget),
        data=list(variant.data),
        config_diff=differences,
        changed_groups=changed_groups(differences),
        note=variant.note,
        procedure_flags=[],
        procedure_sha256=(variant.final or variant.baseline or {}).get("procedure_sha256"),
        metrics=metrics,
        per_class=tables["per_class"],
        per_field=tables["fields"],
        guards=verdicts,
        curves={name: list(points) for name, points in variant.curves.items()},
    )


def _anchor(variants: Sequence[VariantRun], reference: VariantRun | None) -> VariantRun | None:
    """The variant the others' procedure is checked against: the reference, else the first one evaluated."""
    return reference or next((v for v in variants if v.final or v.baseline), None)


def method_warnings(
    variants: Sequence[VariantRun], reference: VariantRun | None, summaries: Sequence[VariantSummary]
) -> list[str]:
    """Where variants break the experiment method (one change at a time, same procedure), and what is missing."""
    found: list[str] = []
    if reference is None:
        found.append("no variant runs the reference config unchanged: deltas against the reference are empty")
    for variant, summary in zip(variants, summaries, strict=True):
        label = f"{variant.name} ({variant.job_id})"
        if variant.state == "succeeded" and variant.final is None:
            found.append(f"{label}: succeeded but has no final evaluation")
        if len(summary.changed_groups) > 1 and not summary.note.strip():
            found.append(
                f"{label}: changes {len(summary.changed_groups)} groups of keys at once "
                f"({', '.join(summary.changed_groups)}) with no note saying why; "
                "an effect cannot be told apart from the others"
            )
        found.extend(f"{label}: {flag.message}" for flag in summary.procedure_flags)
    return found
