"""Dataset versions in artifact storage: commit, read back a preview, delete, resolve references.

Layout of a version (`tunedeck.storage.base.dataset_prefix`), committed with a
MANIFEST.json so a worker's download is checksum-verified:

    data.jsonl             canonical rows (the version's `storage_key` points here)
    preview.json           the first rows, so previews never read the whole file
    dataset_manifest.json  the data layer's manifest (sha256, format, kind, rows)
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi import HTTPException, status

from tunedeck.api.context import ApiContext
from tunedeck.api.dataset_ingest import IngestedDataset
from tunedeck.api.storage_quota import stored_bytes_if_limited
from tunedeck.core.errors import ConfigError, Issue, NotFoundError
from tunedeck.core.ids import new_id
from tunedeck.jobs.access import Actor
from tunedeck.jobs.jobs import SEALED_FOR_TRAINING
from tunedeck.jobs.models import DatasetVersion
from tunedeck.storage.base import dataset_prefix

DATA_FILE = "data.jsonl"
PREVIEW_FILE = "preview.json"
MANIFEST_FILE = "dataset_manifest.json"


def store_version(context: ApiContext, actor: Actor, dataset_id: str, ingested: IngestedDataset) -> DatasetVersion:
    """Commit the canonical file to storage, then record the version row; no row without stored content.

    Refused (QuotaExceededError, nothing stored) when the file would take the owner past their storage limit.
    """
    stored = stored_bytes_if_limited(context, actor.id)
    if stored is not None:
        context.jobs.quotas.refuse_to_store(actor.id, stored, ingested.size_bytes)
    prefix = dataset_prefix(actor.id, new_id("dsu_"))
    staging = Path(tempfile.mkdtemp(prefix="dataset-", dir=_scratch(context)))
    try:
        shutil.move(str(ingested.canonical_path), staging / DATA_FILE)
        (staging / PREVIEW_FILE).write_text(json.dumps(ingested.preview, ensure_ascii=False), encoding="utf-8")
        (staging / MANIFEST_FILE).write_text(json.dumps(ingested.manifest, indent=1), encoding="utf-8")
        context.artifacts.commit_directory(staging, prefix)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    manifest = {**ingested.manifest, "size_bytes": ingested.size_bytes}
    try:
        return context.jobs.datasets.add_version(
            actor,
            dataset_id,
            sha256=str(ingested.manifest["sha256"]),
            format=str(ingested.manifest["format"]),
            kind=str(ingested.manifest["kind"]),
            rows=ingested.rows,
            storage_key=f"{prefix}/{DATA_FILE}",
            manifest=manifest,
            reports=ingested.reports,
        )
    except BaseException:
        # The row never appeared: the stored files are unreachable, so remove them.
        context.artifacts.delete_prefix(prefix)
        raise


def version_prefix(version: DatasetVersion) -> str:
    """The storage folder of a version (the parent of its data file)."""
    return version.storage_key.rsplit("/", 1)[0]


def delete_version_artifacts(context: ApiContext, versions: list[DatasetVersion]) -> None:
    """Remove the stored files of deleted versions."""
    for version in versions:
        context.artifacts.delete_prefix(version_prefix(version))


def read_preview(context: ApiContext, version: DatasetVersion, limit: int) -> list[dict[str, Any]]:
    """The first `limit` canonical rows of a version; none for a sealed test set.

    The API refuses such a preview outright (`refuse_sealed_read`); returning no rows here
    also keeps every other caller (the dashboard's dataset page) from showing test rows.
    """
    if version.sealed:
        return []
    rows: list[dict[str, Any]] = json.loads(context.artifacts.read_bytes(f"{version_prefix(version)}/{PREVIEW_FILE}"))
    return rows[:limit]


def pick_version(context: ApiContext, actor: Actor, dataset_id: str, number: int | None) -> DatasetVersion:
    """Version `number` of a dataset, or its newest; NotFoundError when there is none."""
    versions = context.jobs.datasets.list_versions(actor, dataset_id)
    if number is not None:
        versions = [v for v in versions if v.version == number]
    if not versions:
        what = f"version {number}" if number is not None else "any version"
        raise NotFoundError(f"dataset {dataset_id!r} has no {what}")
    return versions[-1]


def resolve_version(context: ApiContext, actor: Actor, reference: str) -> DatasetVersion:
    """A dataset version from a version id (`dsv_...`) or a dataset id (its newest version)."""
    if reference.startswith("dsv_"):
        return context.jobs.datasets.get_version(actor, reference)
    return pick_version(context, actor, reference, None)


def resolve_version_id(context: ApiContext, actor: Actor, reference: str) -> str:
    """A dataset version id from a version id (`dsv_...`) or a dataset id (its newest version)."""
    return resolve_version(context, actor, reference).id


def resolve_training_version_id(context: ApiContext, actor: Actor, reference: str, field: str) -> str:
    """`resolve_version_id` for data a job trains or validates on: a sealed test set is a 422 naming `field`.

    The experiment method: the test set is read only by the explicit final evaluation of a chosen job.
    """
    version = resolve_version(context, actor, reference)
    if version.sealed:
        raise ConfigError(
            [Issue(SEALED_FOR_TRAINING, field=field, expected="an unsealed dataset version", found=reference)],
            title="sealed test set",
        )
    return version.id


def refuse_sealed_read(version: DatasetVersion) -> None:
    """409 for a direct read of a sealed test set's rows (preview, inspection): only the final evaluation reads it."""
    if version.sealed:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"version {version.version} is a sealed test set: its rows are read only by the explicit final "
            "evaluation of a chosen job (`tunedeck eval test`), which logs every access",
        )


def _scratch(context: ApiContext) -> Path:
    context.scratch_dir.mkdir(parents=True, exist_ok=True)
    return context.scratch_dir
