"""A finished job stored as a worker stores one, from the shared LoRA run (for export and generation tests)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.app import API, AppHarness
from tunedeck.core.states import JobState
from tunedeck.storage.base import checkpoint_prefix, final_prefix, job_prefix

from .conftest import MID_RUN_STEP

RUN_FILES = ("config.json", "env.json", "data_manifest.json", "results.json", "events.jsonl")


def store_finished_job(harness: AppHarness, lora_run: Path, tiny_llama_dir: Path) -> str:
    """Alice's job on the tiny Llama, marked succeeded as if a worker had trained `lora_run`; its id.

    Checkpoint `MID_RUN_STEP` committed, the final model, and the run files a worker
    uploads when a job succeeds.
    """
    dataset = harness.dataset("alice")
    registration = {"name": "tiny", "local_path": str(tiny_llama_dir)}
    model = harness.client.post(f"{API}/base-models", headers=harness.auth("alice"), json=registration).json()
    body = {"name": "chat-tune", "base_model_id": model["id"], "train_dataset_id": dataset["id"], "config": {}}
    job = harness.client.post(f"{API}/jobs", headers=harness.auth("alice"), json=body).json()
    claimed = harness.store.queue.claim("test-worker", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == job["id"]
    owner, token = claimed.owner_id, claimed.fencing_token
    prefix = f"{checkpoint_prefix(owner, job['id'], MID_RUN_STEP)}-attempt-{claimed.attempt}"
    assert harness.store.checkpoints.record_written(job["id"], token, MID_RUN_STEP, prefix)
    manifest = harness.artifacts.commit_directory(lora_run / "checkpoints" / f"checkpoint-{MID_RUN_STEP}", prefix)
    assert harness.store.checkpoints.mark_committed(job["id"], token, MID_RUN_STEP, manifest.digest)
    harness.artifacts.commit_directory(lora_run / "final", final_prefix(owner, job["id"]))
    for name in RUN_FILES:
        harness.artifacts.put_file(f"{job_prefix(owner, job['id'])}/run/{name}", lora_run / name)
    assert harness.store.queue.finish(job["id"], token, JobState.SUCCEEDED)
    return str(job["id"])
