"""A job's model (final or a committed checkpoint) fetched from storage for the engine, and where exports go.

Used by the API (to check a request before queuing it), by the worker (which then launches
the engine as a process) and by the CLI (which may call the engine directly). Everything is
read as `actor`: another user's job is NotFound.
Downloads are verified against their manifests; only committed checkpoints are used.

Exports are committed like checkpoints (files, then `MANIFEST.json`) under
`users/<user>/jobs/<job>/exports/<format>-<final|step-N>` (an MLX export's format part names its
layout and weights: `mlx-float16`, `mlx-4bit`, `mlx-adapter-bfloat16`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunedeck.core.errors import NotFoundError
from tunedeck.core.mlx_export import MLX_VARIANT_PATTERN, MlxExportOptions
from tunedeck.core.rundir import CHECKPOINT_CONFIG
from tunedeck.service.jobs.job_datasets import job_datasets
from tunedeck.storage.base import MANIFEST_NAME, ArtifactStore, TransferProgress, final_prefix, job_prefix
from tunedeck.store.access import Actor
from tunedeck.store.checkpoints import COMMITTED
from tunedeck.store.models import BaseModelRecord, Job
from tunedeck.store.store import JobStore

EXPORT_FORMATS = ("adapter", "merged", "bundle", "mlx")
# An MLX export's name says its layout and weights (`mlx-float16-final`, `mlx-4bit-step-40`, ...).
EXPORT_NAME = re.compile(rf"^(adapter|merged|bundle|{MLX_VARIANT_PATTERN})-(final|step-\d+)$")
EXPORT_RECORD = "export.json"
ADAPTER_CONFIG = "adapter_config.json"
# The run documents the worker uploads under `<job>/run/` when a job ends (see worker.execution).
RUN_FILES = (
    "config.json",
    "env.json",
    "data_manifest.json",
    "results.json",
    "events.jsonl",
    "baseline_eval.json",
    "final_eval.json",
)


@dataclass(frozen=True)
class JobModel:
    """Where a job's final model or checkpoint is stored, and the base model the job names."""

    job_id: str
    owner_id: str
    job_name: str
    label: str  # "final" or "step-<n>"
    storage_prefix: str
    base: dict[str, Any] | None  # {"name": local path or hub id, "revision": commit or None}
    # An adapter trained on top of another job's full weights (`init_from_job`): those weights are its base.
    starting_weights: JobModel | None = None
    # The datasets the job trained on, with their recorded rights (`job_datasets`): the model card lists them.
    datasets: tuple[dict[str, Any], ...] = ()


def label_for(step: int | None) -> str:
    """`final` or `step-<n>` (the engine uses the same labels)."""
    return "final" if step is None else f"step-{step}"


def export_name_for(export_format: str, label: str, mlx: MlxExportOptions | None = None) -> str:
    """An export's stored name: `<format>-<label>`; an MLX export's format part names its layout and weights."""
    if export_format == "mlx":
        return f"{(mlx or MlxExportOptions()).variant_name()}-{label}"
    return f"{export_format}-{label}"


def locate_job_model(
    store: JobStore, artifacts: ArtifactStore, actor: Actor, job_id: str, step: int | None
) -> JobModel:
    """The committed model folder of one of `actor`'s jobs: its final model, or the checkpoint at `step`."""
    job = store.jobs.get(actor, job_id)
    if step is None:
        prefix = final_prefix(job.owner_id, job.id)
        if artifacts.read_manifest(prefix) is None:
            raise NotFoundError(f"job {job.id!r} has no final model yet (state {job.state}); name a checkpoint step")
    else:
        row = store.checkpoints.get(actor, job.id, step)
        if row.state != COMMITTED:
            raise NotFoundError(f"checkpoint {step} of job {job.id!r} is not committed yet")
        prefix = row.storage_prefix
    located = JobModel(job.id, job.owner_id, job.name, label_for(step), prefix, base_reference(store, actor, job))
    return replace(
        located,
        starting_weights=starting_weights(store, artifacts, actor, job, prefix),
        datasets=tuple(job_datasets(store, actor, job)),
    )


def starting_weights(store: JobStore, artifacts: ArtifactStore, actor: Actor, job: Job, prefix: str) -> JobModel | None:
    """The full weights the adapter stored at `prefix` was trained on, when its job started from them; else None.

    Such an adapter means nothing on the job's base model: its run record (saved beside the
    model) says it started from weights (`init_from.how`), and its job names where they came from.
    """
    parent_id = (job.config or {}).get("init_from_job")
    manifest = artifacts.read_manifest(prefix)
    if not parent_id or manifest is None or manifest.entry(ADAPTER_CONFIG) is None:
        return None
    if manifest.entry(CHECKPOINT_CONFIG) is None:
        return None
    record = json.loads(artifacts.read_bytes(f"{prefix}/{CHECKPOINT_CONFIG}").decode("utf-8"))
    if not isinstance(record, dict) or (record.get("init_from") or {}).get("how") != "weights":
        return None
    try:
        return locate_job_model(store, artifacts, actor, str(parent_id), job.config.get("init_from_checkpoint"))
    except NotFoundError:
        raise NotFoundError(
            f"job {job.id!r}'s adapter was trained on the full weights of job {parent_id!r}, which are no longer stored"
        ) from None


def base_reference(store: JobStore, actor: Actor, job: Job) -> dict[str, Any] | None:
    """The job's base model as the engine names one: a local folder, or a hub id at its resolved commit."""
    if job.base_model_id is None:
        return None
    return base_model_reference(store.base_models.get(actor, job.base_model_id))


def base_model_reference(record: BaseModelRecord) -> dict[str, Any]:
    """A registered base model as the engine names one: a local folder, or a hub id at its resolved commit."""
    if record.local_path:
        return {"name": record.local_path, "revision": None}
    return {"name": record.hub_id, "revision": record.resolved or record.revision}


def stored_model_identity(artifacts: ArtifactStore, located: JobModel) -> dict[str, Any]:
    """What the stored model is, exactly: its folder, its manifest's digest (the files' content) and its base.

    Equal identities mean equal model files on the same base, so a model loaded for one
    may answer the other without fetching anything.
    """
    manifest = artifacts.read_manifest(located.storage_prefix)
    if manifest is None:
        raise NotFoundError(f"the {located.label} model of job {located.job_id!r} is no longer stored")
    identity = {"storage_prefix": located.storage_prefix, "digest": manifest.digest, "base": located.base}
    if located.starting_weights is not None:
        identity["base"] = stored_model_identity(artifacts, located.starting_weights)
    return identity


def fetch_job_model(
    artifacts: ArtifactStore, located: JobModel, dest: Path, *, on_progress: TransferProgress | None = None
) -> dict[str, Any]:
    """Download the model folder (verified) and the run documents into `dest`; the engine spec's model keys.

    `on_progress` hears the model folder's bytes as they arrive (the run documents are small and not counted).
    """
    model_dir = dest / "model"
    artifacts.download_directory(located.storage_prefix, model_dir, on_progress=on_progress)
    (model_dir / MANIFEST_NAME).unlink(missing_ok=True)  # storage bookkeeping, not part of the model
    run_root = dest / "run"
    run_root.mkdir(parents=True, exist_ok=True)
    folder = f"{job_prefix(located.owner_id, located.job_id)}/run"
    for name in RUN_FILES:
        if artifacts.exists(f"{folder}/{name}"):
            artifacts.get_file(f"{folder}/{name}", run_root / name)
    base = located.base
    if located.starting_weights is not None:  # the base of this adapter: the starting job's weights, verified too
        weights = dest / "starting-weights"
        artifacts.download_directory(located.starting_weights.storage_prefix, weights, on_progress=on_progress)
        (weights / MANIFEST_NAME).unlink(missing_ok=True)
        base = {"name": str(weights), "revision": None}
    return {
        "model_dir": str(model_dir),
        "label": located.label,
        "run_root": str(run_root),
        "title": located.job_name,
        "base": base,
        "datasets": [dict(dataset) for dataset in located.datasets],
    }


def export_prefix(owner_id: str, job_id: str, export_name: str) -> str:
    """Storage folder of one export of a job."""
    if not EXPORT_NAME.match(export_name):
        raise NotFoundError(
            f"no export named {export_name!r} (expected <adapter|merged|bundle|mlx-...>-<final|step-N>)"
        )
    return f"{job_prefix(owner_id, job_id)}/exports/{export_name}"


def list_export_names(artifacts: ArtifactStore, owner_id: str, job_id: str) -> list[str]:
    """Names of the job's committed exports (those whose manifest is stored), sorted."""
    folder = f"{job_prefix(owner_id, job_id)}/exports"
    names = set()
    for key in artifacts.list(folder):
        relative = key[len(folder) + 1 :]
        name, _, rest = relative.partition("/")
        if rest == MANIFEST_NAME and EXPORT_NAME.match(name):
            names.add(name)
    return sorted(names)
