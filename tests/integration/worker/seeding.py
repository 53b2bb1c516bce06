"""Putting a user, a base model, a dataset version and a job into a store, as the API would."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.storage.base import ArtifactStore, user_prefix
from tunedeck.store.models import Job, User
from tunedeck.store.store import JobStore


def chat_rows(count: int) -> list[dict[str, Any]]:
    """Small arithmetic conversations a tiny model learns in a few steps."""
    return [
        {
            "messages": [
                {"role": "user", "content": f"What is {i} plus {i}?"},
                {"role": "assistant", "content": f"{i} plus {i} is {2 * i}."},
            ]
        }
        for i in range(count)
    ]


TINY_JOB_CONFIG: dict[str, Any] = {
    "epochs": 1,
    "batch_size": 2,
    "gradient_accumulation_steps": 1,
    "learning_rate": 1e-3,
    "max_length": 64,
    "mixed_precision": "fp32",
    "gradient_checkpointing": False,
    "eval_strategy": "no",
    "save_strategy": "steps",
    "save_steps": 4,
    "logging_steps": 1,
    "lora_r": 4,
    "lora_alpha": 8,
    "lora_dropout": 0.0,
    "preflight": False,  # measured in the end-to-end test; the crash tests run many short attempts
}


@dataclass
class SeededJob:
    """What `seed_job` created."""

    user: User
    job: Job


def seed_job(
    store: JobStore,
    artifacts: ArtifactStore,
    model_dir: Path,
    rows: list[dict[str, Any]],
    *,
    config: dict[str, Any] | None = None,
    user: User | None = None,
    name: str = "tiny-job",
    validation_rows: list[dict[str, Any]] | None = None,
    devices_needed: int | None = None,
    max_attempts: int | None = None,
) -> SeededJob:
    """Register everything a job needs and enqueue it (`max_attempts`: the store's default when None)."""
    owner = user or store.users.create_user(f"user-{hashlib.sha256(name.encode()).hexdigest()[:8]}")
    base = store.base_models.register(owner, name="tiny", local_path=str(model_dir))
    train = _store_dataset(store, artifacts, owner, f"{name}-train", rows)
    validation = _store_dataset(store, artifacts, owner, f"{name}-val", validation_rows) if validation_rows else None
    job = store.jobs.enqueue(
        owner,
        name=name,
        config=config or TINY_JOB_CONFIG,
        base_model_id=base.id,
        train_dataset_version_id=train,
        validation_dataset_version_id=validation,
        devices_needed=devices_needed,
        max_attempts=max_attempts,
    )
    return SeededJob(user=owner, job=job)


def _store_dataset(
    store: JobStore, artifacts: ArtifactStore, owner: User, name: str, rows: list[dict[str, Any]]
) -> str:
    body = ("\n".join(json.dumps(row, sort_keys=True) for row in rows) + "\n").encode()
    digest = hashlib.sha256(body).hexdigest()
    dataset = store.datasets.create_dataset(owner, name)
    key = f"{user_prefix(owner.id)}/datasets/{dataset.id}/{digest[:16]}.jsonl"
    artifacts.put_bytes(key, body)
    version = store.datasets.add_version(
        owner, dataset.id, sha256=digest, format="chat", rows=len(rows), storage_key=key
    )
    return version.id
