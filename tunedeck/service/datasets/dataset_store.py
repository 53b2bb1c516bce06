"""Dataset versions in artifact storage: queue an upload's ingestion, read back a preview, delete, resolve references.

The layout of a stored version is `tunedeck.service.datasets.dataset_versions`'s; a worker writes it
(`tunedeck.worker.work_handlers.run_ingestion`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from tunedeck.core.errors import ConfigError, Issue, NotFoundError
from tunedeck.core.ids import new_id
from tunedeck.data.task_kinds import kind_issue
from tunedeck.service.context import ServiceContext
from tunedeck.service.datasets.dataset_versions import PREVIEW_FILE, version_prefix
from tunedeck.service.datasets.received_upload import ReceivedUpload
from tunedeck.service.exports.work_requests import queue_work
from tunedeck.service.users.storage_quota import stored_bytes_if_limited
from tunedeck.storage.base import upload_prefix
from tunedeck.store.access import Actor
from tunedeck.store.errors import AlreadyExistsError
from tunedeck.store.jobs import SEALED_FOR_TRAINING
from tunedeck.store.models import DatasetVersion, WorkItem
from tunedeck.store.retention import purged_message


def queue_ingestion(context: ServiceContext, user: Actor, received: ReceivedUpload, inputs: dict[str, Any]) -> WorkItem:
    """Keep the received file in storage under the user's uploads and queue its ingestion.

    Refused at once (nothing kept) when the new dataset's name is taken or the file would take the
    owner past their storage limit; the worker checks both again when it records the dataset.
    """
    name = inputs.get("name")
    if name is not None and context.jobs.datasets.find_by_name(user, str(name)) is not None:
        raise AlreadyExistsError(f"dataset {name!r} already exists")
    stored = stored_bytes_if_limited(context, user.id)
    if stored is not None:
        context.jobs.quotas.refuse_to_store(user.id, stored, received.size)
    upload_id = new_id("upl_")
    key = f"{upload_prefix(user.id, upload_id)}/upload{received.suffix}"
    context.artifacts.put_file(key, received.path)
    try:
        inputs = {**inputs, "upload_id": upload_id, "upload_key": key, "upload_bytes": received.size}
        return queue_work(context, user, "ingest", inputs)
    except BaseException:
        context.artifacts.delete_prefix(upload_prefix(user.id, upload_id))  # no item will ever read it
        raise


def queue_hub_ingestion(context: ServiceContext, user: Actor, inputs: dict[str, Any]) -> WorkItem:
    """Queue the ingestion of a hub dataset split; a worker fetches it (the API reads nothing from the hub).

    Refused at once when the new dataset's name is taken; the storage limit is checked by the
    worker once the split's size is known.
    """
    name = inputs.get("name")
    if name is not None and context.jobs.datasets.find_by_name(user, str(name)) is not None:
        raise AlreadyExistsError(f"dataset {name!r} already exists")
    # No upload is stored, but the item's files are named after an upload id like any ingestion's.
    return queue_work(context, user, "ingest", {**inputs, "upload_id": new_id("upl_")})


def read_preview(context: ServiceContext, version: DatasetVersion, limit: int) -> list[dict[str, Any]]:
    """The first `limit` canonical rows of a version; none for a sealed test set.

    The API refuses such a preview outright (`tunedeck.api.dataset_reads.refuse_sealed_read`); returning no rows here
    also keeps every other caller (the dashboard's dataset page) from showing test rows.
    """
    if version.sealed or version.purged_at is not None:
        return []
    rows: list[dict[str, Any]] = json.loads(context.artifacts.read_bytes(f"{version_prefix(version)}/{PREVIEW_FILE}"))
    return rows[:limit]


def pick_version(context: ServiceContext, actor: Actor, dataset_id: str, number: int | None) -> DatasetVersion:
    """Version `number` of a dataset, or its newest; NotFoundError when there is none."""
    versions = context.jobs.datasets.list_versions(actor, dataset_id)
    if number is not None:
        versions = [v for v in versions if v.version == number]
    if not versions:
        what = f"version {number}" if number is not None else "any version"
        raise NotFoundError(f"dataset {dataset_id!r} has no {what}")
    return versions[-1]


def resolve_version(context: ServiceContext, actor: Actor, reference: str) -> DatasetVersion:
    """A dataset version from a version id (`dsv_...`) or a dataset id (its newest version)."""
    if reference.startswith("dsv_"):
        return context.jobs.datasets.get_version(actor, reference)
    return pick_version(context, actor, reference, None)


def resolve_version_id(context: ServiceContext, actor: Actor, reference: str) -> str:
    """A dataset version id from a version id (`dsv_...`) or a dataset id (its newest version)."""
    return resolve_version(context, actor, reference).id


def resolve_training_version_id(
    context: ServiceContext, actor: Actor, reference: str, field: str, *, task: str | None = None
) -> str:
    """`resolve_version_id` for data a job trains or validates on: a sealed test set is a 422 naming `field`.

    The experiment method: the test set is read only by the explicit final evaluation of a chosen job.
    With `task`, rows of a kind that cannot train it are a 422 naming `field` too.
    """
    version = resolve_version(context, actor, reference)
    if task is not None:
        refuse_unfit_rows(version, task, field, reference)
    if version.sealed:
        raise ConfigError(
            [Issue(SEALED_FOR_TRAINING, field=field, expected="an unsealed dataset version", found=reference)],
            title="sealed test set",
        )
    if version.purged_at is not None:
        message = purged_data_message(context, actor, version)
        raise ConfigError(
            [Issue(message, field=field, expected="a dataset version whose data is stored", found=reference)],
            title="dataset data deleted",
        )
    return version.id


def refuse_unfit_rows(version: DatasetVersion, task: str, field: str, reference: str) -> None:
    """A 422 naming `field` when the version's rows are of a kind that cannot train `task` (e.g. chat rows for dpo)."""
    issue = kind_issue(version.kind, task, file=reference)
    if issue is not None:
        raise ConfigError([replace(issue, field=field)], title="dataset does not fit the task")


def purged_data_message(context: ServiceContext, actor: Actor, version: DatasetVersion) -> str:
    """Why a version whose raw data a retention policy deleted cannot be read (its dataset named)."""
    assert version.purged_at is not None
    dataset = context.jobs.datasets.get_dataset(actor, version.dataset_id)
    return purged_message(dataset.name, version.version, version.purged_at)
