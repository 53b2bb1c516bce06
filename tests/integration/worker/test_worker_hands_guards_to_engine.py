"""The worker hands the job's guards and its own memory cap setting to the engine in the run spec."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.job_claims import claim_job
from tunedeck.engine.training.run_spec import RunSpec
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore
from tunedeck.worker.inputs import prepare_inputs

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job


def test_the_run_spec_carries_the_job_guards(tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path) -> None:
    store = JobStore.open(sqlite_url)
    artifacts = open_store((tmp_path / "artifacts").as_uri())
    seeded = seed_job(store, artifacts, tiny_llama_dir, chat_rows(8), validation_rows=chat_rows(4))
    guarded = store.jobs.enqueue(
        seeded.user,
        name="guarded",
        config=TINY_JOB_CONFIG,
        base_model_id=seeded.job.base_model_id,
        train_dataset_version_id=seeded.job.train_dataset_version_id,
        validation_dataset_version_id=seeded.job.validation_dataset_version_id,
        guards=["eval_loss <= baseline + 0.05", "json_valid_rate >= baseline"],
    )
    claimed = [claim_job(store, "worker-a", 0, 60.0) for _ in range(2)]
    by_id = {job.job_id: job for job in claimed if job is not None}
    assert by_id[seeded.job.id].guards == []
    assert by_id[guarded.id].guards == ["eval_loss <= baseline + 0.05", "json_valid_rate >= baseline"]

    inputs = prepare_inputs(store, artifacts, by_id[guarded.id], tmp_path / "attempt")
    written = json.loads(inputs.spec_path.read_text(encoding="utf-8"))
    assert written["guards"] == ["eval_loss <= baseline + 0.05", "json_valid_rate >= baseline"]
    assert RunSpec.read(inputs.spec_path).guards == written["guards"]
    store.close()


def test_the_run_spec_carries_the_workers_memory_cap_and_its_version(
    tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path
) -> None:
    store = JobStore.open(sqlite_url)
    artifacts = open_store((tmp_path / "artifacts").as_uri())
    seeded = seed_job(store, artifacts, tiny_llama_dir, chat_rows(8))
    claimed = claim_job(store, "worker-a", 0, 60.0)
    assert claimed is not None
    inputs = prepare_inputs(store, artifacts, claimed, tmp_path / "attempt", memory_cap="24GiB")
    written = json.loads(inputs.spec_path.read_text(encoding="utf-8"))
    assert (written["version"], written["memory_cap"], written["job_id"]) == (1, "24GiB", seeded.job.id)
    assert RunSpec.read(inputs.spec_path).memory_cap == "24GiB"  # the engine's preflight and training apply it
    store.close()
