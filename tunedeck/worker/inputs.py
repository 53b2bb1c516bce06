"""Everything a claimed job needs on the worker's disk before the engine starts.

Datasets, the checkpoint to resume from and the model a chained job starts from
(`init_from_job`) come from artifact storage (checksums verified on download), so any
worker machine can run any job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tunedeck.core.errors import StorageError
from tunedeck.core.run_spec import ModelName, RunSpecFile
from tunedeck.core.tracker_destinations import TrackerDestinations
from tunedeck.storage.base import ArtifactStore
from tunedeck.store.base_models import refuse_unallowed_remote_code
from tunedeck.store.records import ClaimedJob
from tunedeck.store.store import JobStore
from tunedeck.worker.parent_model import fetch_parent_model


@dataclass(frozen=True)
class JobOwner:
    """The job's owner as an `Actor`: the worker reads only what the owner may read."""

    id: str
    role: str = "user"


@dataclass(frozen=True)
class PreparedInputs:
    """Local paths of one attempt: the spec the engine reads and where it writes."""

    spec_path: Path
    run_dir: Path
    resume_step: int | None


def prepare_inputs(
    store: JobStore,
    artifacts: ArtifactStore,
    claimed: ClaimedJob,
    attempt_dir: Path,
    cache_dir: Path | None = None,
    trackers: TrackerDestinations | None = None,
    *,
    system_sample_s: float | None = None,
    memory_cap: str | None = None,
) -> PreparedInputs:
    """Download datasets, the resume checkpoint and the starting job's model, and write the engine's run spec.

    `trackers` (the worker's tracker destinations) goes into the spec only when the job reports to a tracker;
    `system_sample_s` is the seconds between the run's system samples (None: the engine's default);
    `memory_cap` the simulated memory cap of the worker's settings (None: none).
    """
    owner = JobOwner(claimed.owner_id)
    data_dir = attempt_dir / "inputs"
    data_dir.mkdir(parents=True, exist_ok=True)
    if claimed.base_model_id is None:
        raise StorageError("the job names no base model")
    if claimed.train_dataset_version_id is None:
        raise StorageError("the job names no training dataset")
    base = store.base_models.get(owner, claimed.base_model_id)
    # Checked again at claim: an admin may have withdrawn the permission since the job was made.
    refuse_unallowed_remote_code(bool(claimed.config.get("trust_remote_code")), base)
    model = ModelName(name=base.local_path or base.hub_id, revision=base.revision)
    train = _fetch_dataset(store, artifacts, owner, claimed.train_dataset_version_id, data_dir / "train")
    validation = None
    if claimed.validation_dataset_version_id is not None:
        validation = _fetch_dataset(
            store, artifacts, owner, claimed.validation_dataset_version_id, data_dir / "validation"
        )
    resume_path, resume_step = _fetch_resume_checkpoint(store, artifacts, claimed, attempt_dir / "resume")
    parent = fetch_parent_model(store, artifacts, owner, claimed.config, data_dir / "init_from")
    run_dir = attempt_dir / "run"
    spec = RunSpecFile(
        config=claimed.config,
        model=model,
        train=str(train),
        validation=str(validation) if validation else None,
        out=str(run_dir),
        resume_from=str(resume_path) if resume_path else None,
        cache_dir=str(cache_dir) if cache_dir else None,
        job_id=claimed.job_id,
        init_from=str(parent.model_dir) if parent else None,
        lineage=parent.lineage if parent else None,
        job_name=claimed.name,
        tracking=trackers.to_dict() if trackers is not None and claimed.config.get("report_to") else None,
        guards=list(claimed.guards),
        system_sample_seconds=system_sample_s,
        memory_cap=memory_cap,
    )
    spec_path = spec.write(attempt_dir / "spec.json")
    return PreparedInputs(spec_path=spec_path, run_dir=run_dir, resume_step=resume_step)


def _fetch_dataset(
    store: JobStore, artifacts: ArtifactStore, owner: JobOwner, version_id: str, stem: Path
) -> Path:
    version = store.datasets.get_version(owner, version_id)
    suffix = Path(version.storage_key).suffix or ".jsonl"
    return artifacts.get_file(version.storage_key, stem.with_suffix(suffix))


def _fetch_resume_checkpoint(
    store: JobStore, artifacts: ArtifactStore, claimed: ClaimedJob, folder: Path
) -> tuple[Path | None, int | None]:
    """The newest committed checkpoint whose manifest verifies, downloaded; (None, None) for a fresh start.

    A checkpoint whose files no longer match its manifest is skipped for the
    next older one rather than failing the job: resuming earlier loses time,
    resuming from damaged weights loses the run.
    """
    if claimed.resume_from is None:
        return None, None
    for checkpoint in store.checkpoints.committed(claimed.job_id):
        if not artifacts.verify(checkpoint.storage_prefix):
            continue
        target = folder / f"checkpoint-{checkpoint.step}"
        artifacts.download_directory(checkpoint.storage_prefix, target)
        return target, checkpoint.step
    return None, None
