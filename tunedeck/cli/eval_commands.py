"""`tunedeck eval test | report` and `tunedeck compare`: sealed test, job report, experiment comparison.

The commands read the job store and artifact storage named by the `TUNEDECK_*`
settings and hand plain data to the builders in `tunedeck.eval`. The CLI runs
with direct database access, so it reads as an administrator would; a sealed-test
access is recorded in the name of the job's owner.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.cli.store_access import DATABASE_HELP, Operator, open_stores

if TYPE_CHECKING:
    from tunedeck.config.training import TrainingConfig
    from tunedeck.data.loading import LoadedDataset
    from tunedeck.eval.sealed_test import SealedTestOutcome, TestSetAccess
    from tunedeck.eval.test_contamination import ContaminationCheck
    from tunedeck.storage.base import ArtifactStore
    from tunedeck.store.models import DatasetVersion, Job, User
    from tunedeck.store.store import JobStore

app = typer.Typer(help="Evaluate trained models: the sealed test set and job reports.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


class StoreAccessLog:
    """The sealed-test access log of one dataset version, kept in the job store."""

    def __init__(self, store: JobStore, owner: User, version_id: str) -> None:
        self.store, self.owner, self.version_id = store, owner, version_id

    def record(self, *, job_id: str, purpose: str) -> None:
        """Log one access in the store."""
        self.store.datasets.record_test_set_access(self.owner, self.version_id, job_id=job_id, purpose=purpose)

    def accesses(self) -> list[TestSetAccess]:
        """Every logged access, oldest first."""
        from tunedeck.eval.sealed_test import TestSetAccess

        return [
            TestSetAccess(job_id=row.job_id, user_id=row.user_id, purpose=row.purpose, time=row.time)
            for row in self.store.datasets.list_test_set_accesses(self.owner, self.version_id)
        ]


def _refuse(message: str, field: str, expected: str | None = None) -> None:
    from tunedeck.core.errors import ConfigError, Issue

    raise ConfigError([Issue(message, field=field, expected=expected)], title="cannot evaluate the test set")


def _base_model_dir(store: JobStore, owner: User, base_model_id: str | None) -> Path | None:
    from tunedeck.engine.models.model_source import ModelRef, resolve_model

    if base_model_id is None:
        return None
    base = store.base_models.get(owner, base_model_id)
    if base.local_path:
        return resolve_model(ModelRef(base.local_path)).path
    return resolve_model(ModelRef(str(base.hub_id), base.resolved or base.revision)).path


@app.command("test")
def test_set(
    job: str = typer.Option(..., "--job", help="Id of the job whose final model is judged."),
    dataset: str = typer.Option(..., "--dataset", help="Id of the sealed dataset version (dsv_...)."),
    seal: bool = typer.Option(False, "--seal", help="Seal the dataset version first if it is not sealed yet."),
    out: Path | None = typer.Option(None, "--out", help="Write the full result (metrics, outputs, accesses) here."),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Default: the job's batch size."),
    max_new_tokens: int = typer.Option(128, "--max-new-tokens", min=1, help="Cap on generated tokens per answer."),
    allow_contamination: bool = typer.Option(
        False,
        "--allow-contamination",
        help="Score a test set that repeats training or validation rows; the warning is kept with the result.",
    ),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Evaluate one job's final model on a sealed test set; every access is logged, the second one warns.

    Before scoring, the test rows are compared with the job's training and validation
    rows: exact or near duplicates refuse the evaluation (naming the rows) unless
    --allow-contamination is given.
    """
    from tunedeck.config.loading import validate_config
    from tunedeck.storage.base import job_prefix

    with reported_errors():
        store, artifacts = open_stores(database_url)
        with store:
            row = store.jobs.get(Operator(), job)
            owner = store.users.get_user(row.owner_id)
            version = _test_version(store, owner, row, dataset, seal=seal)
            config = validate_config(row.config)
            scored = _score_sealed_test(
                store, artifacts, owner, row, version, config,
                batch_size=batch_size, max_new_tokens=max_new_tokens, allow_contamination=allow_contamination,
            )
            outcome = scored.outcome
            document = {
                "dataset": version.id,
                **outcome.to_dict(),
                "contamination": {**scored.check.to_dict(), "warning": scored.contamination_warning},
            }
            count = len(outcome.accesses)
            artifacts.put_bytes(
                f"{job_prefix(owner.id, row.id)}/test_evals/{version.id}-access-{count}.json",
                json.dumps(document, indent=2, allow_nan=True).encode("utf-8"),
            )
    _print_metrics(document["metrics"], f"sealed test {version.id} on job {row.id} (access {count})")
    for warning in (scored.contamination_warning, outcome.warning):
        if warning:
            err_console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    if out is not None:
        out.write_text(json.dumps(document, indent=2, allow_nan=True) + "\n", encoding="utf-8")
        console.print(f"result written to {out}", highlight=False)


def _test_version(store: JobStore, owner: User, row: Job, dataset: str, *, seal: bool) -> DatasetVersion:
    """The dataset version that may test the job: the job finished, the version is not one it learned from,
    and it is sealed (sealed now with `seal`); refused otherwise, in that order."""
    if row.state != "succeeded":
        _refuse(f"job {row.id} is {row.state}; only a finished job has a final model", "--job", "succeeded")
    version = store.datasets.get_version(owner, dataset)
    if version.id in (row.train_dataset_version_id, row.validation_dataset_version_id):
        _refuse("this dataset version trained or validated the job, so it cannot test it", "--dataset")
    if not version.sealed:
        if not seal:
            _refuse(
                "this dataset version is not sealed, so its accesses are not logged",
                "--dataset",
                "a sealed version (pass --seal to seal it now)",
            )
        store.datasets.seal(owner, version.id)
    return version


@dataclass(frozen=True)
class _ScoredTest:
    """The sealed test's outcome, with the contamination check made before it and its warning."""

    outcome: SealedTestOutcome
    check: ContaminationCheck
    contamination_warning: str | None


def _score_sealed_test(
    store: JobStore,
    artifacts: ArtifactStore,
    owner: User,
    row: Job,
    version: DatasetVersion,
    config: TrainingConfig,
    *,
    batch_size: int | None,
    max_new_tokens: int,
    allow_contamination: bool,
) -> _ScoredTest:
    """Download the test rows and the job's final model into scratch, refuse a contaminated test set (unless
    allowed), and score the model with the job's evaluation procedure (the access is logged)."""
    from tunedeck.data.loading import load_dataset
    from tunedeck.eval.procedure import GenerationSettings, eval_task_for
    from tunedeck.eval.runner import make_procedure
    from tunedeck.eval.sealed_test import SEALED_TEST_PURPOSE, TestSetReuseWarning, evaluate_sealed_test
    from tunedeck.eval.test_contamination import require_clean_test_set
    from tunedeck.eval.trained_model import load_trained_model
    from tunedeck.storage.base import final_prefix

    with tempfile.TemporaryDirectory(prefix="tunedeck-test-") as scratch:
        folder = Path(scratch)
        suffix = Path(version.storage_key).suffix or ".jsonl"
        loaded = load_dataset(artifacts.get_file(version.storage_key, folder / f"test{suffix}"))
        check = _contamination(store, artifacts, owner, row, loaded, folder)
        contamination_warning = require_clean_test_set(check, allow_contamination=allow_contamination)
        artifacts.download_directory(final_prefix(owner.id, row.id), folder / "final")
        trained = load_trained_model(
            folder / "final",
            base_model_dir=_base_model_dir(store, owner, row.base_model_id),
            trust_remote_code=config.trust_remote_code,
        )
        label2id = trained.label2id or {}
        labels = sorted(label2id, key=label2id.__getitem__) if label2id else None
        procedure = make_procedure(
            loaded.rows,
            loaded.kind,
            task=eval_task_for(config.task, loaded.kind),
            max_length=config.max_length,
            batch_size=batch_size or config.batch_size,
            generation=GenerationSettings(max_new_tokens=max_new_tokens),
            labels=labels,
            train_on_inputs=config.train_on_inputs,
            truncation=config.truncation,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TestSetReuseWarning)  # printed below, once
            outcome = evaluate_sealed_test(
                trained.model,
                trained.tokenizer,
                loaded.rows,
                procedure,
                job_id=row.id,
                access_log=StoreAccessLog(store, owner, version.id),
                purpose=SEALED_TEST_PURPOSE + (" (contaminated test set allowed)" if check.rows else ""),
            )
    return _ScoredTest(outcome, check, contamination_warning)


def _contamination(
    store: JobStore, artifacts: ArtifactStore, owner: User, job: Job, test: LoadedDataset, folder: Path
) -> ContaminationCheck:
    """The test rows compared with the data `job` trained and validated on (what cannot be read is named)."""
    from tunedeck.data.loading import load_dataset
    from tunedeck.eval.test_contamination import check_test_contamination

    seen, unchecked = {}, []
    used = (("train", job.train_dataset_version_id), ("validation", job.validation_dataset_version_id))
    for split, version_id in used:
        if version_id is None:
            continue
        version = store.datasets.get_version(owner, version_id)
        if version.purged_at is not None:
            unchecked.append(f"the {split} data {version.id}: its rows were deleted")
            continue
        suffix = Path(version.storage_key).suffix or ".jsonl"
        seen[split] = load_dataset(artifacts.get_file(version.storage_key, folder / f"{split}{suffix}"))
    return check_test_contamination(test, seen, unchecked=unchecked)


def _print_metrics(metrics: dict[str, Any], title: str) -> None:
    from tunedeck.eval.comparison_render import fmt
    from tunedeck.eval.experiment_report import scalar_metrics

    table = Table("metric", "value", title=title)
    for name, value in scalar_metrics(metrics).items():
        table.add_row(name, fmt(value))
    console.print(table)


def compare(
    experiment_id: str = typer.Argument(..., help="Experiment id (exp_...)."),
    html: Path | None = typer.Option(None, "--html", help="Write a self-contained HTML report here."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Write a Markdown report here."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the comparison as JSON here."),
    guard: list[str] = typer.Option([], "--guard", help="Extra guard, e.g. 'per_class.spam.f1 >= 0.8'."),
    reference: str | None = typer.Option(None, "--reference", help="Job id of the reference variant."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """Compare the variants of an experiment: metrics with deltas, config differences, curves, guards."""
    from tunedeck.eval.comparison_render import comparison_html, comparison_markdown, fmt
    from tunedeck.eval.experiment_report import build_comparison
    from tunedeck.service.plans.experiment_sources import load_experiment_data

    with reported_errors():
        store, artifacts = open_stores(database_url)
        with store:
            data = load_experiment_data(
                store, artifacts, Operator(), experiment_id, guards=guard, reference_job_id=reference
            )
        comparison = build_comparison(data)
    table = Table("variant", "state", *comparison.metric_names, title=f"experiment {comparison.name}")
    for variant in comparison.variants:
        cells = [fmt(variant.metrics[name].value) for name in comparison.metric_names]
        table.add_row(variant.name + (" (ref)" if variant.is_reference else ""), variant.state, *cells)
    console.print(table)
    for warning in comparison.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    for path, text in (
        (html, comparison_html(comparison) if html else None),
        (markdown, comparison_markdown(comparison) if markdown else None),
        (json_out, json.dumps(comparison.to_dict(), indent=2, allow_nan=True) if json_out else None),
    ):
        if path is not None and text is not None:
            path.write_text(text, encoding="utf-8")
            console.print(f"written {path}", highlight=False)


@app.command("report")
def job_report(
    job: str = typer.Option(..., "--job", help="Job id."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Write the report as Markdown here."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the report as JSON here."),
    guard: list[str] = typer.Option([], "--guard", help="Extra guard, e.g. 'json_valid_rate >= baseline'."),
    database_url: str | None = typer.Option(None, "--database-url", help=DATABASE_HELP),
) -> None:
    """The final report of a job: model reference, configuration, comparative results, observed limits."""
    from tunedeck.eval.job_report import build_job_report
    from tunedeck.service.plans.experiment_sources import job_report_inputs

    with reported_errors():
        store, artifacts = open_stores(database_url)
        with store:
            report = build_job_report(**job_report_inputs(store, artifacts, Operator(), job, guards=guard))
    text = report.to_markdown()
    if markdown is not None:
        markdown.write_text(text, encoding="utf-8")
    if json_out is not None:
        json_out.write_text(json.dumps(report.to_dict(), indent=2, allow_nan=True) + "\n", encoding="utf-8")
    if markdown is None and json_out is None:
        console.print(text, highlight=False, markup=False)
