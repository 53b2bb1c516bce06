"""Gathering what the evaluation reports need from the job store and artifact storage.

The report builders (`tunedeck.eval.experiment_report`, `tunedeck.eval.job_report`)
take plain data; this module reads it, scoped to one actor, so the CLI, the API
and the dashboard feed them identically. Nothing here imports torch.

Per job it reads the row (state, reason, config, datasets), the run files the
worker uploaded under `<job prefix>/run/` (`config.json` for the config the run
trained with, what it resolved and the step budget, `results.json`,
`data_manifest.json`, `baseline_eval.json`, `final_eval.json`), the guards the
job declared (`<job prefix>/guards.json`), the dataset manifests and the `loss` /
`eval_loss` series.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from tunedeck.core.errors import NotFoundError
from tunedeck.core.model_licence import describe_recorded
from tunedeck.eval.experiment_report import GUARDS_KEY, ExperimentData, VariantRun, variant_notes
from tunedeck.eval.guards import Guard, parse_guards
from tunedeck.eval.result import BASELINE_EVAL_FILE, FINAL_EVAL_FILE
from tunedeck.service.jobs.job_datasets import job_datasets
from tunedeck.service.jobs.job_guards import read_job_guards
from tunedeck.storage.base import ArtifactStore, job_prefix
from tunedeck.store.access import Actor
from tunedeck.store.models import Job
from tunedeck.store.store import JobStore

CURVE_SERIES = ("loss", "eval_loss")
_MAX_JOBS = 200


def run_document(artifacts: ArtifactStore, job: Job, name: str) -> dict[str, Any] | None:
    """One JSON file of a job's uploaded run directory, or None when it was never uploaded."""
    key = f"{job_prefix(job.owner_id, job.id)}/run/{name}"
    if not artifacts.exists(key):
        return None
    data = json.loads(artifacts.read_bytes(key).decode("utf-8"))
    return data if isinstance(data, dict) else None


def job_reason(job: Job) -> str | None:
    """Why a job did not succeed, in one line (None for a job that did or is still going)."""
    if job.state == "succeeded":
        return None
    if job.error_message:
        return job.error_message.splitlines()[0]
    if job.diagnosis:
        return str(job.diagnosis.get("message") or job.diagnosis.get("kind") or "")
    return "cancelled by request" if job.state == "cancelled" else None


def job_data_manifests(store: JobStore, actor: Actor, job: Job) -> list[dict[str, Any]]:
    """The datasets a job used: role, version id, name, version, content sha256, rows, and recorded rights."""
    return job_datasets(store, actor, job)


def job_budget(job: Job, run_config: dict[str, Any] | None, results: dict[str, Any] | None) -> dict[str, Any]:
    """What bounded the training: epochs, planned total steps, steps actually run."""
    derived = (run_config or {}).get("derived") or {}
    return {
        "epochs": job.config.get("epochs"),
        "total_steps": derived.get("total_steps") or (results or {}).get("total_steps"),
        "global_step": (results or {}).get("global_step"),
    }


def variant_run(store: JobStore, artifacts: ArtifactStore, actor: Actor, job: Job, note: str = "") -> VariantRun:
    """One job as a comparison variant; `note` says why it changes what it changes."""
    run_config = run_document(artifacts, job, "config.json")
    results = run_document(artifacts, job, "results.json")
    curves = {name: store.telemetry.series(actor, job.id, name) for name in CURVE_SERIES}
    return VariantRun(
        job_id=job.id,
        name=job.name,
        state=job.state,
        # What the run trained with, when it recorded it (e.g. the accumulation kept on resume); else the request.
        config=dict((run_config or {}).get("config") or job.config),
        reason=job_reason(job),
        budget=job_budget(job, run_config, results),
        data=job_data_manifests(store, actor, job),
        baseline=run_document(artifacts, job, BASELINE_EVAL_FILE),
        final=run_document(artifacts, job, FINAL_EVAL_FILE),
        curves={name: points for name, points in curves.items() if points},
        derived=dict((run_config or {}).get("derived") or {}),
        model=dict((run_config or {}).get("model") or {}),
        note=note,
    )


def pin_dataset_versions(reference_config: dict[str, Any], newest_version_id: Callable[[str], str]) -> dict[str, Any]:
    """`reference_config` naming its validation data by version (`dsv_...`), as a job's config does.

    A job's config names the exact version it evaluates on, so a reference naming a
    dataset (`ds_...`) is compared in that form too: `newest_version_id` turns the
    dataset id into its newest version's id (it raises when there is none).
    """
    value = reference_config.get("validation_dataset_id")
    if not isinstance(value, str) or not value or value.startswith("dsv_"):
        return reference_config
    return {**reference_config, "validation_dataset_id": newest_version_id(value)}


def experiment_guards(reference_config: dict[str, Any], extra: Sequence[str] = ()) -> list[Guard]:
    """Guards stored with the experiment (under `guards` beside its reference config) plus `extra` ones."""
    stored = reference_config.get(GUARDS_KEY) or []
    return parse_guards([*stored, *extra])


def experiment_jobs(store: JobStore, actor: Actor, experiment_id: str) -> list[Job]:
    """Every job of an experiment `actor` may see, oldest first."""
    jobs: list[Job] = []
    cursor = None
    while True:
        page = store.jobs.list(actor, experiment_id=experiment_id, limit=_MAX_JOBS, cursor=cursor)
        jobs.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    jobs.sort(key=lambda job: (job.created_at, job.id))
    return jobs


def load_experiment_data(
    store: JobStore,
    artifacts: ArtifactStore,
    actor: Actor,
    experiment_id: str,
    *,
    guards: Sequence[str] = (),
    reference_job_id: str | None = None,
) -> ExperimentData:
    """Everything `build_comparison` needs about one of `actor`'s experiments, oldest job first."""
    experiment = store.experiments.get(actor, experiment_id)
    jobs = experiment_jobs(store, actor, experiment.id)
    reference_config = dict(experiment.reference_config or {})
    notes = variant_notes(reference_config)
    try:
        # Experiments recorded before references were pinned may name a dataset: read it as its newest version.
        compared = pin_dataset_versions(reference_config, lambda ds: store.datasets.list_versions(actor, ds)[-1].id)
    except (NotFoundError, IndexError):
        compared = reference_config
    return ExperimentData(
        experiment_id=experiment.id,
        name=experiment.name,
        hypothesis=experiment.hypothesis,
        reference_config=compared,
        variants=[variant_run(store, artifacts, actor, job, notes.get(job.id, "")) for job in jobs],
        guards=experiment_guards(reference_config, guards),
        reference_job_id=reference_job_id,
    )


def job_report_inputs(
    store: JobStore, artifacts: ArtifactStore, actor: Actor, job_id: str, *, guards: Sequence[str] = ()
) -> dict[str, Any]:
    """Keyword arguments for `tunedeck.eval.job_report.build_job_report` about one of `actor`'s jobs.

    Guards: the experiment's, then those the job declared at creation, then `guards`.
    """
    job = store.jobs.get(actor, job_id)
    run_config = run_document(artifacts, job, "config.json") or {}
    manifest = run_document(artifacts, job, "data_manifest.json") or {}
    prefix = job_prefix(job.owner_id, job.id)
    model: dict[str, Any] = {"trained": "adapter" if job.config.get("use_peft") else "full model"}
    if job.base_model_id is not None:
        base = store.base_models.get(actor, job.base_model_id)
        model.update(base_model=base.hub_id or base.local_path, revision=base.resolved or base.revision)
    # Read from the base model's own files when the run started (`config.json`'s `model.licence`).
    model["base_model_licence"] = describe_recorded((run_config.get("model") or {}).get("licence"))
    model["artifact"] = f"{prefix}/final" if job.state == "succeeded" else None
    if job.config.get("init_from_job"):
        # A model started from another job's: the report names that job and how it started.
        start = run_config.get("init_from") or {}
        step = job.config.get("init_from_checkpoint")
        how = str(start.get("how") or "").replace("_", " ")
        point = f"step {step}" if step else "final model"
        model["started_from"] = f"job {job.config['init_from_job']} ({point}" + (f", {how})" if how else ")")
    experiment = None
    reference_config: dict[str, Any] = {}
    if job.experiment_id is not None:
        record = store.experiments.get(actor, job.experiment_id)
        reference_config = dict(record.reference_config or {})
        experiment = {"id": record.id, "name": record.name, "hypothesis": record.hypothesis}
    # Contamination is overlap *between* training and evaluation data, so only the run can know it: the
    # engine compares both splits and writes the record to data_manifest.json. An upload's own dedup
    # report sees a single split and never reports any.
    contamination = manifest.get("contamination")
    tests = [
        json.loads(artifacts.read_bytes(key).decode("utf-8"))
        for key in artifacts.list(f"{prefix}/test_evals")
        if key.endswith(".json")
    ]
    return {
        "job_id": job.id,
        "name": job.name,
        "state": job.state,
        "model": model,
        "config": run_config.get("config") or dict(job.config),
        "baseline": run_document(artifacts, job, BASELINE_EVAL_FILE),
        "final": run_document(artifacts, job, FINAL_EVAL_FILE),
        "guards": experiment_guards(reference_config, [*read_job_guards(artifacts, job), *guards]),
        "training_truncation": (manifest.get("tokenization") or {}).get("train"),
        "contamination": contamination if isinstance(contamination, dict) else None,
        "test_evaluations": tests,
        "experiment": experiment,
        "datasets": job_data_manifests(store, actor, job),
    }
