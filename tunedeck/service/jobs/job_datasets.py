"""The datasets a job trained on, with the rights their owner recorded: one list for reports and exports."""

from __future__ import annotations

from typing import Any

from tunedeck.core.errors import NotFoundError
from tunedeck.store.access import Actor
from tunedeck.store.models import Job
from tunedeck.store.store import JobStore


def job_datasets(store: JobStore, actor: Actor, job: Job) -> list[dict[str, Any]]:
    """Each dataset version `job` names: role, version id, dataset name, version, content sha256, rows, licence,
    rights note.

    A version deleted since is left out (the job's reference to it was cleared), and so is one
    `actor` may not read: an operator reads jobs, never users' datasets.
    """
    found = []
    for role, version_id in (
        ("train", job.train_dataset_version_id),
        ("validation", job.validation_dataset_version_id),
    ):
        if version_id is None:
            continue
        try:
            version = store.datasets.get_version(actor, version_id)
            dataset = store.datasets.get_dataset(actor, version.dataset_id)
        except NotFoundError:
            continue
        manifest = version.manifest or {}
        found.append(
            {
                "role": role,
                "version_id": version.id,
                "name": dataset.name,
                "version": version.version,
                "sha256": manifest.get("sha256") or version.sha256,
                "rows": version.rows,
                "licence": dataset.licence,
                "rights_note": dataset.rights_note,
            }
        )
    return found
