"""What deleting a dataset, a dataset version, a job, an export or a user reaches, and asking for it.

The one rule for every caller (the API, the dashboard, the CLI, a retention sweep):

- a job: its rows (events, metrics, checkpoints, work items), its storage folder
  (checkpoints, final model, exports, run documents) and its run folder on the worker;
  the jobs that started from its model (`init_from_job`, down the chain) only when asked
  (`with_models`), else the request is refused, as for data that trained models;
- a dataset version: its row, its stored files, and the tokenized cache entries built
  from its content unless another remaining version has the same content; the jobs
  trained on it (and those that started from their models) only when asked
  (`with_models`), else the request is refused;
- a dataset: the same for each of its versions, then its row;
- an export: its stored files and the work item that built it (so asking again rebuilds it);
- a user (admins only, never themselves): every row they own, their whole storage
  folder, their received uploads, their jobs' run folders and their data's cache entries.

The rows go at once, with a `pending` receipt and a `delete` work item in the same
transaction (`JobStore.deletions.record`); a worker removes the rest and closes the receipt.
"""

from __future__ import annotations

from collections.abc import Sequence

from tunedeck.core.errors import ForbiddenError, NotFoundError, StateTransitionError
from tunedeck.core.states import WorkKind, WorkState
from tunedeck.service.datasets.dataset_versions import version_prefix
from tunedeck.service.jobs.job_models import export_prefix
from tunedeck.service.jobs.job_parents import started_from
from tunedeck.storage.base import job_prefix, upload_prefix, user_prefix
from tunedeck.store.access import Actor, is_admin
from tunedeck.store.deletions import TARGET_KINDS, DeletionOrder, RowsToDelete
from tunedeck.store.models import DatasetVersion, DeletionReceipt, Job
from tunedeck.store.store import JobStore
from tunedeck.store.work_items import dedup_key


class TrainedModelsError(StateTransitionError):
    """Deleting data that trained jobs still kept, without asking to delete those jobs too."""

    def __init__(self, what: str, jobs: Sequence[Job], *, relation: str = "was trained on this data") -> None:
        self.jobs = [(job.id, job.name) for job in jobs]
        self.relation = relation  # how each listed job depends on the target, e.g. "was trained on this data"
        named = ", ".join(f"{job.id} ({job.name})" for job in jobs)
        verb = "trained" if relation == "was trained on this data" else "started"
        super().__init__(
            f"{what} {verb} {len(jobs)} job(s): {named}. Delete those jobs first, "
            "or repeat the request with ?with_models=true to delete them with it"
        )


def request_deletion(
    store: JobStore,
    actor: Actor,
    target_kind: str,
    target_id: str,
    *,
    with_models: bool = False,
    reason: str = "request",
) -> DeletionReceipt:
    """Delete the target's rows now and queue the removal of every other copy; the `pending` receipt.

    NotFoundError when `actor` cannot see the target, TrainedModelsError (a conflict) for
    data that trained jobs without `with_models`, StateTransitionError for a running job,
    ForbiddenError for a user deletion by a non-admin or of oneself.

    The plan and its removal are one transaction holding the asker's row, so a job cannot be made
    from a model being deleted between the two.
    """
    with store.transaction(for_user=actor.id):
        order = plan_deletion(store, actor, target_kind, target_id, with_models=with_models, reason=reason)
        return store.deletions.record(actor, order)


def plan_deletion(
    store: JobStore,
    actor: Actor,
    target_kind: str,
    target_id: str,
    *,
    with_models: bool = False,
    reason: str = "request",
) -> DeletionOrder:
    """What deleting the target reaches (the module docstring's rule), as an order for the store."""
    if target_kind == "job":
        job = store.jobs.get(actor, target_id)
        children = started_from(store, [job])
        if children and not with_models:
            raise TrainedModelsError(
                f"the model of job {job.id} ({job.name})", children, relation="started from this job's model"
            )
        return _order("job", job.id, job.name, reason, jobs=[job, *children])
    if target_kind == "export":
        return _export_order(store, actor, target_id, reason)
    if target_kind == "dataset":
        dataset = store.datasets.get_dataset(actor, target_id)
        versions = store.datasets.list_versions(actor, dataset.id)
        jobs = _trained_jobs(store, f"dataset {dataset.name!r}", versions, with_models)
        return _order("dataset", dataset.id, dataset.name, reason, jobs=jobs, versions=versions,
                      dataset_ids=(dataset.id,))  # fmt: skip
    if target_kind == "dataset_version":
        version = store.datasets.get_version(actor, target_id)
        dataset = store.datasets.get_dataset(actor, version.dataset_id)
        label = f"{dataset.name} v{version.version}"
        jobs = _trained_jobs(store, f"dataset version {label!r}", [version], with_models)
        return _order("dataset_version", version.id, label, reason, jobs=jobs, versions=[version])
    if target_kind == "user":
        return _user_order(store, actor, target_id, reason)
    raise ValueError(f"unknown deletion target {target_kind!r}; expected one of {TARGET_KINDS}")


def _trained_jobs(store: JobStore, what: str, versions: Sequence[DatasetVersion], with_models: bool) -> list[Job]:
    trained = store.deletions.jobs_trained_on([version.id for version in versions])
    jobs = [*trained, *started_from(store, trained)]  # a model started from theirs learned from the data too
    if jobs and not with_models:
        raise TrainedModelsError(what, jobs)
    return jobs


def _order(
    kind: str,
    target_id: str,
    label: str,
    reason: str,
    *,
    jobs: Sequence[Job] = (),
    versions: Sequence[DatasetVersion] = (),
    dataset_ids: Sequence[str] = (),
) -> DeletionOrder:
    """The order for jobs and dataset versions (with their datasets' rows), nothing more."""
    return DeletionOrder(
        target_kind=kind,
        target_id=target_id,
        target_label=label,
        reason=reason,
        rows=RowsToDelete(
            dataset_ids=tuple(dataset_ids),
            version_ids=tuple(version.id for version in versions),
            job_ids=tuple(job.id for job in jobs),
        ),
        worker_inputs={
            "storage_prefixes": [version_prefix(v) for v in versions] + [job_prefix(j.owner_id, j.id) for j in jobs],
            "job_ids": [job.id for job in jobs],
            "dataset_sha256s": sorted({version.sha256 for version in versions}),
            "upload_prefixes": [],
        },
    )


def _export_order(store: JobStore, actor: Actor, target_id: str, reason: str) -> DeletionOrder:
    job_id, _, name = target_id.partition("/")
    job = store.jobs.get(actor, job_id)
    prefix = export_prefix(job.owner_id, job.id, name)
    key = dedup_key(WorkKind.EXPORT.value, {"prefix": prefix})  # the identity the export route queues with
    items = store.work.list_items(actor, job_id=job.id, kinds=[WorkKind.EXPORT.value], limit=200)
    building = [item for item in items if item.dedup_key == key and not WorkState(item.state).is_terminal]
    if building:
        raise StateTransitionError(f"export {name!r} of job {job.id!r} is being built: wait for it or cancel it first")
    return DeletionOrder(
        target_kind="export",
        target_id=f"{job.id}/{name}",
        target_label=f"{job.name} {name}",
        reason=reason,
        rows=RowsToDelete(work_item_ids=tuple(item.id for item in items if item.dedup_key == key)),
        worker_inputs={"storage_prefixes": [prefix], "job_ids": [], "dataset_sha256s": [], "upload_prefixes": []},
    )


def _user_order(store: JobStore, actor: Actor, user_id: str, reason: str) -> DeletionOrder:
    if not is_admin(actor):
        raise ForbiddenError("only an admin deletes users")
    if user_id == actor.id:
        raise ForbiddenError("an admin cannot delete themselves; ask another admin")
    try:
        user = store.users.get_user(user_id)
    except NotFoundError:
        raise NotFoundError(f"user {user_id!r} not found") from None
    jobs, versions = store.deletions.owned_by(user.id)
    uploads = [
        upload_prefix(user.id, str(item.inputs["upload_id"]))
        for item in store.work.list_items(user, kinds=[WorkKind.INGEST.value], limit=200)
        if item.inputs.get("upload_id")
    ]
    return DeletionOrder(
        target_kind="user",
        target_id=user.id,
        target_label=user.name,
        reason=reason,
        rows=RowsToDelete(user_id=user.id),
        worker_inputs={
            "storage_prefixes": [user_prefix(user.id)],
            "job_ids": [job.id for job in jobs],
            "dataset_sha256s": sorted({version.sha256 for version in versions}),
            "upload_prefixes": uploads,
        },
    )
