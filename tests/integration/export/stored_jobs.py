"""A finished job stored as a worker stores one, from the shared LoRA run (for export and generation tests)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.app import AppHarness
from tests.fixtures.stored_jobs import store_succeeded_job

from .conftest import MID_RUN_STEP


def store_finished_job(harness: AppHarness, lora_run: Path, tiny_llama_dir: Path) -> str:
    """Alice's job on the tiny Llama, marked succeeded as if a worker had trained `lora_run`; its id.

    Checkpoint `MID_RUN_STEP` committed, the final model, and the run files a worker
    uploads when a job succeeds.
    """
    checkpoint = lora_run / "checkpoints" / f"checkpoint-{MID_RUN_STEP}"
    return store_succeeded_job(
        harness, tiny_llama_dir, checkpoints={MID_RUN_STEP: checkpoint}, final=lora_run / "final", run_folder=lora_run
    )
