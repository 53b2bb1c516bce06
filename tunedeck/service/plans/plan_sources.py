"""Rental plans from the store: what a plan request names, resolved into a workload and figures, and its tracking.

The arithmetic is in `tunedeck.planning` (plain data in, plain data out); this module reads
what it needs, scoped to one actor, so the API, the dashboard and the CLI plan alike: the
experiment and its jobs, the datasets' row counts, and the preflight report measured on
the machine (a named preflight item, a worker's newest one, or one an experiment's job
kept in its run record). Nothing here imports torch.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tunedeck.api.schemas.plans import PlanCreate, PlanOut
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.states import WorkKind, WorkState
from tunedeck.planning.figures import Machine, Measured, PlanFigures, measured_from_report, resolve_figures
from tunedeck.planning.timeline import RENTAL_DAYS, Timeline, VariantWork, Workload, build_timeline
from tunedeck.planning.tracking import Tracking, VariantRun, track
from tunedeck.service.plans.experiment_sources import experiment_jobs, run_document
from tunedeck.storage.base import ArtifactStore
from tunedeck.store.access import Actor
from tunedeck.store.job_progress import progress_for
from tunedeck.store.models import Job, RentalPlan
from tunedeck.store.store import JobStore

PREFLIGHT_FILE = "preflight.json"
_SCANNED_ITEMS = 200  # a worker's preflights are looked for among the caller's newest ones


def _refuse(message: str, field: str, expected: str | None = None) -> ConfigError:
    return ConfigError([Issue(message, field=field, expected=expected)], title="cannot plan the rental")


def _config_default(key: str) -> int:
    return int(TrainingConfig.model_fields[key].default)


def _preflight_item_report(store: JobStore, actor: Actor, item_id: str) -> dict[str, Any]:
    item = store.work.get(actor, item_id)
    report = (item.result or {}).get("report") if item.state == WorkState.SUCCEEDED.value else None
    if item.kind != WorkKind.PREFLIGHT.value or not isinstance(report, dict):
        raise _refuse(
            f"work item {item_id!r} is a {item.kind} item in state {item.state}",
            "preflight_id",
            "a preflight work item that succeeded",
        )
    return report


def _worker_report(store: JobStore, actor: Actor, worker_id: str) -> tuple[str, dict[str, Any]]:
    for item in store.work.list_items(actor, kinds=[WorkKind.PREFLIGHT.value], limit=_SCANNED_ITEMS):
        report = (item.result or {}).get("report")
        if item.worker_id == worker_id and item.state == WorkState.SUCCEEDED.value and isinstance(report, dict):
            return item.id, report
    raise _refuse(
        f"worker {worker_id!r} has reported no hardware: none of your checks before training ran on it",
        "machine.worker_id",
        "a worker that ran a preflight of yours (POST /api/v1/preflight)",
    )


def _job_report(artifacts: ArtifactStore, jobs: list[Job]) -> tuple[str, dict[str, Any]] | None:
    for job in reversed(jobs):  # the newest run's checks describe the experiment best
        try:
            report = run_document(artifacts, job, PREFLIGHT_FILE)
        except (OSError, ValueError):
            continue
        if report is not None:
            return f"of job {job.id}", report
    return None


def _machine_and_measured(
    store: JobStore, artifacts: ArtifactStore, actor: Actor, body: PlanCreate, jobs: list[Job]
) -> tuple[Machine, Measured | None]:
    named = (body.preflight_id, _preflight_item_report(store, actor, body.preflight_id)) if body.preflight_id else None
    if body.machine.worker_id is not None:
        origin, report = named or _worker_report(store, actor, body.machine.worker_id)
        measured = measured_from_report(report, origin)
        return Machine(measured.device_name, measured.device_count), measured
    assert body.machine.device_type is not None
    machine = Machine(body.machine.device_type.strip(), body.machine.device_count)
    found = named or _job_report(artifacts, jobs)
    return machine, measured_from_report(found[1], found[0]) if found is not None else None


def _rows(store: JobStore, actor: Actor, given: int | None, dataset_id: str | None, field: str) -> int | None:
    if given is not None:
        return given
    if dataset_id is None:
        return None
    versions = store.datasets.list_versions(actor, dataset_id)
    if not versions:
        raise _refuse(f"dataset {dataset_id!r} has no version", field, "a dataset with an uploaded version")
    return versions[-1].rows


def _job_rows(store: JobStore, actor: Actor, jobs: list[Job], attribute: str) -> int | None:
    for job in reversed(jobs):
        version_id = getattr(job, attribute)
        if version_id is not None:
            return store.datasets.get_version(actor, version_id).rows
    return None


def _variants(body: PlanCreate, jobs: list[Job], reference: dict[str, Any], train_rows: int) -> tuple[VariantWork, ...]:
    epochs = int(reference.get("epochs") or _config_default("epochs"))
    if body.variants:
        names = [variant.name for variant in body.variants]
        if len(set(names)) != len(names):
            raise _refuse("two variants have the same name", "variants", "one name per variant")
        return tuple(
            VariantWork(variant.name, variant.train_rows or train_rows, variant.epochs or epochs)
            for variant in body.variants
        )
    named: dict[str, VariantWork] = {}
    for job in jobs:
        named.setdefault(job.name, VariantWork(job.name, train_rows, int(job.config.get("epochs") or epochs)))
    if not named:
        raise _refuse(
            "the experiment has no job yet, so there is no variant to plan", "variants", "the variants to try"
        )
    return tuple(named.values())


def create_plan(store: JobStore, artifacts: ArtifactStore, actor: Actor, body: PlanCreate) -> RentalPlan:
    """Resolve what `body` names into a workload and figures, and store the plan (a ConfigError names a bad field)."""
    experiment = store.experiments.get(actor, body.experiment_id)
    jobs = experiment_jobs(store, actor, experiment.id)
    reference = dict(experiment.reference_config or {})
    train_rows = _rows(store, actor, body.train_rows, body.train_dataset_id, "train_dataset_id")
    train_rows = train_rows or _job_rows(store, actor, jobs, "train_dataset_version_id")
    if not train_rows:
        raise _refuse("the training rows are unknown", "train_rows", "train_rows, or train_dataset_id")
    validation_rows = _rows(store, actor, body.validation_rows, body.validation_dataset_id, "validation_dataset_id")
    if validation_rows is None:
        validation_rows = _job_rows(store, actor, jobs, "validation_dataset_version_id") or 0
    test_rows = _rows(store, actor, body.test_rows, body.test_dataset_id, "test_dataset_id") or 0
    workload = Workload(_variants(body, jobs, reference, train_rows), validation_rows, test_rows)
    machine, measured = _machine_and_measured(store, artifacts, actor, body, jobs)
    tokens = body.tokens_per_row or int(reference.get("max_length") or _config_default("max_length"))
    figures = resolve_figures(
        machine, measured=measured, model_params=body.model_params, tokens_per_row=tokens, efficiency=body.efficiency
    )
    return store.plans.create(
        actor,
        experiment_id=experiment.id,
        name=body.name or experiment.name,
        machine={"device_type": machine.device_type, "device_count": machine.device_count,
                 "worker_id": body.machine.worker_id},
        workload=workload_dict(workload, tokens),
        figures=figures.to_dict(),
        margin_share=body.margin_share,
        price_per_hour=body.price_per_hour,
        rental_days=body.rental_days,
    )  # fmt: skip


def workload_dict(workload: Workload, tokens_per_row: int) -> dict[str, Any]:
    """The stored form of a workload."""
    return {
        "variants": [{"name": v.name, "train_rows": v.train_rows, "epochs": v.epochs} for v in workload.variants],
        "validation_rows": workload.validation_rows,
        "test_rows": workload.test_rows,
        "tokens_per_row": tokens_per_row,
    }


def plan_timeline(row: RentalPlan) -> Timeline:
    """The timeline of a stored plan."""
    stored = row.workload
    workload = Workload(
        tuple(VariantWork(str(v["name"]), int(v["train_rows"]), int(v["epochs"])) for v in stored["variants"]),
        int(stored["validation_rows"]),
        int(stored["test_rows"]),
    )
    return build_timeline(
        workload, PlanFigures.from_dict(row.figures), margin_share=row.margin_share, price_per_hour=row.price_per_hour
    )


def tracked_days(row: RentalPlan, timeline: Timeline) -> int:
    """The rental the plan is tracked against: the chosen one, else the shortest that holds it, else the longest."""
    return row.rental_days or timeline.shortest_rental_days or RENTAL_DAYS[-1]


def variant_runs(store: JobStore, actor: Actor, experiment_id: str) -> dict[str, VariantRun]:
    """The experiment's jobs as variant runs, keyed by job name (the newest job of a name wins)."""
    jobs = experiment_jobs(store, actor, experiment_id)
    progress = progress_for(store, jobs)
    runs: dict[str, VariantRun] = {}
    for job in jobs:
        seen = progress.get(job.id)
        runs[job.name] = VariantRun(
            name=job.name,
            job_id=job.id,
            state=job.state,
            started_at=job.started_at,
            finished_at=job.finished_at,
            step=seen.step if seen else None,
            total_steps=seen.total_steps if seen else None,
            eta_seconds=seen.eta_seconds if seen else None,
        )
    return runs


def plan_tracking(store: JobStore, actor: Actor, row: RentalPlan, timeline: Timeline, now: datetime) -> Tracking | None:
    """Actual against planned at `now`; None before the rental started."""
    if row.started_at is None:
        return None
    runs = variant_runs(store, actor, row.experiment_id)
    return track(timeline, started_at=row.started_at, rental_days=tracked_days(row, timeline), runs=runs, now=now)


def plan_out(store: JobStore, actor: Actor, row: RentalPlan, now: datetime) -> PlanOut:
    """The response form of a plan: as stored, its timeline, and its tracking at `now`."""
    timeline = plan_timeline(row)
    tracking = plan_tracking(store, actor, row, timeline, now)
    return PlanOut(
        id=row.id,
        name=row.name,
        experiment_id=row.experiment_id,
        machine=row.machine,
        price_per_hour=row.price_per_hour,
        margin_share=row.margin_share,
        rental_days=row.rental_days,
        created_at=row.created_at,
        started_at=row.started_at,
        workload=row.workload,
        figures=row.figures,
        timeline=timeline.to_dict(),
        tracking=tracking.to_dict() if tracking is not None else None,
    )
