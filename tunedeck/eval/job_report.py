"""The final report of one job, as the experiment method asks it be delivered: model, configuration, results, limits.

`build_job_report` takes plain data (what the run directory and the store hold) and
returns a `JobReport` rendered as JSON (`to_dict`) or Markdown (`to_markdown`):

- the model or adapter reference: base model and exact revision, its licence (as read from the
  base model's files when the run started), where the result is;
- the training data: each dataset with the licence and rights note its owner recorded;
- the configuration;
- comparative results: every top-level metric at baseline and at the end, with the delta,
  guard verdicts, and sealed-test evaluations when there were any;
- observed limits: classes and fields that got worse than the baseline, metrics that got
  worse, truncated examples (training rows cut by `max_length`, evaluation prompts cut,
  answers stopped by the new-token cap), and contamination warnings from the data checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedeck.core.dataset_rights import describe_dataset_licence
from tunedeck.eval.comparison_render import fmt, fmt_delta
from tunedeck.eval.experiment_report import CLASS_STATS, FIELD_STATS, metric_change, scalar_metrics
from tunedeck.eval.guards import Guard, evaluate_guards
from tunedeck.eval.markdown_text import md_code, md_fence, md_text

REPORT_FORMAT = "tunedeck.job_report/1"


@dataclass
class JobReport:
    """One job's deliverable summary; see the module docstring."""

    job_id: str
    name: str
    state: str
    model: dict[str, Any]
    config: dict[str, Any]
    results: list[dict[str, Any]]
    guards: list[dict[str, Any]]
    limits: dict[str, Any]
    test_evaluations: list[dict[str, Any]] = field(default_factory=list)
    procedure_sha256: str | None = None
    experiment: dict[str, Any] | None = None
    datasets: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "format": REPORT_FORMAT,
            "job_id": self.job_id,
            "name": self.name,
            "state": self.state,
            "experiment": self.experiment,
            "model": self.model,
            "datasets": self.datasets,
            "config": self.config,
            "procedure_sha256": self.procedure_sha256,
            "results": self.results,
            "guards": self.guards,
            "test_evaluations": self.test_evaluations,
            "limits": self.limits,
        }

    def to_markdown(self) -> str:
        """The report as Markdown."""
        lines = [f"# Job report: {md_text(self.name)} (`{self.job_id}`)", "", f"**State:** {self.state}", ""]
        if self.experiment:
            lines += [
                f"**Experiment:** {md_text(self.experiment.get('name', ''))} "
                f"({md_code(self.experiment.get('id', ''))}): {md_text(self.experiment.get('hypothesis', ''))}",
                "",
            ]
        lines += ["## Model", ""] + [f"- **{key}:** {md_text(value)}" for key, value in self.model.items()] + [""]
        lines += _data_lines(self.datasets)
        lines += ["## Configuration", "", *md_fence(json.dumps(self.config, indent=2, sort_keys=True), "json"), ""]
        lines += [
            "## Results",
            "",
            f"Evaluation procedure `{self.procedure_sha256 or 'unknown'}` "
            "(the same for the baseline and the final evaluation).",
            "",
        ]
        lines += ["| metric | baseline | final | delta | change |", "| --- | --- | --- | --- | --- |"]
        lines += [
            f"| {md_text(r['metric'])} | {fmt(r['baseline'])} | {fmt(r['final'])} | {fmt_delta(r['delta'])} | "
            f"{r['change'] or '—'} |"
            for r in self.results
        ]
        lines.append("")
        if self.guards:
            lines += (
                ["### Guards", ""]
                + [
                    f"- {'pass' if g['passed'] else '**VIOLATED**'}: {md_code(g['guard'])} ({md_text(g['reason'])})"
                    for g in self.guards
                ]
                + [""]
            )
        for test in self.test_evaluations:
            lines += [f"### Sealed test {md_code(test.get('dataset', ''))}", ""]
            lines += [f"- {md_text(key)}: {fmt(value)}" for key, value in scalar_metrics(test.get("metrics")).items()]
            if test.get("warning"):
                lines.append(f"- **warning:** {md_text(test['warning'])}")
            lines.append("")
        lines += ["## Observed limits", ""]
        lines += [f"- {md_text(text)}" for text in limit_sentences(self.limits)] or ["- none observed"]
        return "\n".join(lines) + "\n"


def build_job_report(
    *,
    job_id: str,
    name: str,
    state: str,
    model: Mapping[str, Any],
    config: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
    final: Mapping[str, Any] | None,
    guards: Sequence[Guard] = (),
    training_truncation: Mapping[str, Any] | None = None,
    contamination: Mapping[str, Any] | None = None,
    test_evaluations: Sequence[Mapping[str, Any]] = (),
    experiment: Mapping[str, Any] | None = None,
    datasets: Sequence[Mapping[str, Any]] = (),
) -> JobReport:
    """Assemble the report of one job from plain data.

    `model`: base model name, revision, and where the adapter or merged model is.
    `baseline` / `final`: the evaluation documents of the run. `training_truncation`:
    the tokenization report of the training data (`data_manifest.json`). `contamination`:
    a dedup contamination record (`pairs_by_split`, `threshold`). `test_evaluations`:
    sealed-test outcome documents, each with a `dataset` id. `datasets`: the datasets the job
    trained on (role, name, version, sha256, rows, licence, rights_note).
    """
    before = dict((baseline or {}).get("metrics") or {})
    after = dict((final or {}).get("metrics") or {})
    start, end = scalar_metrics(before), scalar_metrics(after)
    results = [
        {
            "metric": metric,
            "baseline": start.get(metric),
            "final": end.get(metric),
            "delta": end[metric] - start[metric] if metric in start and metric in end else None,
            "change": metric_change(metric, end.get(metric), start.get(metric)),
        }
        for metric in dict.fromkeys([*end, *start])
    ]
    verdicts = [result.to_dict() for result in evaluate_guards(guards, after, before or None)] if final else []
    limits = {
        "metrics_worse": [r for r in results if r["change"] == "worse"],
        "classes_worse": _worse_rows(before.get("per_class"), after.get("per_class"), CLASS_STATS, "class"),
        "fields_worse": _worse_rows(before.get("fields"), after.get("fields"), FIELD_STATS, "field"),
        "truncation": _truncation(final, training_truncation),
        "contamination": contamination_warnings(contamination),
        "guard_violations": [g["guard"] for g in verdicts if not g["passed"]],
    }
    return JobReport(
        job_id=job_id,
        name=name,
        state=state,
        model=dict(model),
        config=dict(config),
        results=results,
        guards=verdicts,
        limits=limits,
        test_evaluations=[
            {
                "dataset": test.get("dataset"),
                "metrics": test.get("metrics"),
                "warning": (test.get("sealed_test") or {}).get("warning"),
                "access_count": (test.get("sealed_test") or {}).get("access_count"),
            }
            for test in test_evaluations
        ],
        procedure_sha256=(final or baseline or {}).get("procedure_sha256"),
        experiment=dict(experiment) if experiment else None,
        datasets=[dict(dataset) for dataset in datasets],
    )


def _data_lines(datasets: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report's data section: each dataset, its licence, and its rights note when there is one."""
    if not datasets:
        return []
    lines = ["## Training data", ""]
    for dataset in datasets:
        version = f" v{dataset['version']}" if dataset.get("version") is not None else ""
        lines.append(
            f"- **{md_text(dataset.get('role') or 'dataset')}:** {md_text(dataset.get('name') or 'unnamed')}{version}"
            f" — licence: {md_text(describe_dataset_licence(dataset.get('licence')))}"
        )
        if dataset.get("rights_note"):
            lines.append(f"  - rights: {md_text(' '.join(str(dataset['rights_note']).split()))}")
    return [*lines, ""]


def _worse_rows(before: Any, after: Any, stats: Sequence[str], what: str) -> list[dict[str, Any]]:
    """Rows (classes or fields) where a statistic fell below its baseline value."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return []
    worse = []
    for row, values in after.items():
        start = before.get(row)
        if not isinstance(values, Mapping) or not isinstance(start, Mapping):
            continue
        for stat in stats:
            old, new = start.get(stat), values.get(stat)
            if (
                isinstance(old, int | float)
                and isinstance(new, int | float)
                and metric_change(stat, new, old) == "worse"
            ):
                worse.append({what: row, "stat": stat, "baseline": old, "final": new, "delta": new - old})
    return worse


def _truncation(final: Mapping[str, Any] | None, training: Mapping[str, Any] | None) -> dict[str, Any]:
    examples = list((final or {}).get("examples") or [])
    evaluation = dict((final or {}).get("truncation") or {})
    return {
        "training_rows_truncated": (training or {}).get("truncated"),
        "training_rows": (training or {}).get("total"),
        "training_rows_lost_part_of_answer": (training or {}).get("lost_part_of_answer"),
        "evaluation_rows_truncated": evaluation.get("truncated"),
        "evaluation_prompts_truncated": [e["index"] for e in examples if e.get("prompt_truncated")],
        "answers_cut_at_max_new_tokens": [e["index"] for e in examples if e.get("cut_at_max_new_tokens")],
    }


def contamination_warnings(record: Mapping[str, Any] | None) -> list[str]:
    """Sentences for a dedup contamination record: training rows that reappear in evaluation data."""
    if not record or not record.get("contaminated"):
        return []
    threshold = record.get("threshold")
    return [
        f"{count} training row(s) duplicate rows of the {split} split (exact or near, similarity >= {threshold}): "
        f"scores on {split} may overstate what the model learned"
        for split, count in sorted((record.get("pairs_by_split") or {}).items())
    ]


def limit_sentences(limits: Mapping[str, Any]) -> list[str]:
    """The observed limits as readable sentences (Markdown report, CLI)."""
    out = [
        f"metric {r['metric']} got worse: {fmt(r['baseline'])} → {fmt(r['final'])}"
        for r in limits.get("metrics_worse", [])
    ]
    out += [
        f"class {r['class']}: {r['stat']} got worse, {fmt(r['baseline'])} → {fmt(r['final'])}"
        for r in limits.get("classes_worse", [])
    ]
    out += [
        f"field {r['field']}: {r['stat']} got worse, {fmt(r['baseline'])} → {fmt(r['final'])}"
        for r in limits.get("fields_worse", [])
    ]
    trunc = limits.get("truncation") or {}
    if trunc.get("training_rows_truncated"):
        out.append(
            f"{trunc['training_rows_truncated']} of {trunc.get('training_rows')} training rows were cut at "
            f"max_length ({trunc.get('training_rows_lost_part_of_answer') or 0} lost part of their answer)"
        )
    if trunc.get("evaluation_rows_truncated"):
        out.append(f"{trunc['evaluation_rows_truncated']} evaluation rows were cut at max_length")
    if trunc.get("evaluation_prompts_truncated"):
        out.append(f"evaluation prompts cut to fit: examples {trunc['evaluation_prompts_truncated'][:20]}")
    if trunc.get("answers_cut_at_max_new_tokens"):
        out.append(f"answers stopped by the new-token cap: examples {trunc['answers_cut_at_max_new_tokens'][:20]}")
    out += list(limits.get("contamination", []))
    out += [f"guard violated: {guard}" for guard in limits.get("guard_violations", [])]
    return out
