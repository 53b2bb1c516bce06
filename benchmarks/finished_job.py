"""A finished LoRA job on the tiny Llama, trained by a running server through its public API.

The tiny model is built into the server's model root (as `tunedeck demo` does), the
data is uploaded, the model registered and the job created over HTTP; the server's
embedded worker trains it on CPU and commits a checkpoint every `SAVE_STEPS` steps.
The job's checkpoints and final model are then what exports and generations read.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

SAVE_STEPS = 2
BATCH_SIZE = 2
TRAIN_TIMEOUT_S = 900.0
ENDED = frozenset({"succeeded", "failed", "cancelled"})
# Small and fast on two CPU cores: what matters here is that real model folders exist to export.
JOB_CONFIG: dict[str, Any] = {
    "epochs": 1,
    "batch_size": BATCH_SIZE,
    "gradient_accumulation_steps": 1,
    "learning_rate": 1e-3,
    "max_length": 64,
    "mixed_precision": "fp32",
    "gradient_checkpointing": False,
    "eval_strategy": "no",
    "save_strategy": "steps",
    "save_steps": SAVE_STEPS,
    "logging_steps": 1,
    "lora_r": 4,
    "lora_alpha": 8,
    "lora_dropout": 0.0,
    "preflight": False,
}


@dataclass(frozen=True)
class FinishedJob:
    """The job's id, its committed checkpoint steps and how long training took (launch to success)."""

    job_id: str
    steps: tuple[int, ...]
    train_seconds: float


def build_tiny_model(model_root: Path) -> Path:
    """The project's tiny Llama, built under `model_root` (the server's default model root)."""
    from tunedeck.demo.tiny_models import create_tiny_model

    return create_tiny_model("llama", model_root / "tiny-llama").path


def chat_jsonl(count: int) -> bytes:
    """`count` distinct small arithmetic conversations, one JSON object a line."""
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"What is {i} plus {i}?"},
                {"role": "assistant", "content": f"{i} plus {i} is {2 * i}."},
            ]
        }
        for i in range(count)
    ]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def train_finished_job(client: httpx.Client, model_dir: Path, checkpoints: int) -> FinishedJob:
    """Upload, register and train a job with `checkpoints` committed checkpoints; return it once succeeded."""
    rows = checkpoints * SAVE_STEPS * BATCH_SIZE  # one epoch: a checkpoint every SAVE_STEPS steps
    dataset = client.post(
        "/datasets", params={"wait": 50}, files={"file": ("train.jsonl", chat_jsonl(rows))}, data={"name": "bench"}
    )  # the server's worker ingests it; `wait` answers once it has
    dataset.raise_for_status()
    model = client.post("/base-models", json={"name": "tiny-llama", "local_path": str(model_dir)})
    model.raise_for_status()
    body = {
        "name": "load-bench",
        "base_model_id": model.json()["id"],
        "train_dataset_id": dataset.json()["result"]["dataset_id"],
        "config": JOB_CONFIG,
    }
    created = client.post("/jobs", json=body)
    created.raise_for_status()
    job_id = created.json()["id"]
    started = time.monotonic()
    state = wait_for_job_end(client, job_id)
    if state != "succeeded":
        raise RuntimeError(f"the benchmark's training job ended {state}: {client.get(f'/jobs/{job_id}').text}")
    listed = client.get(f"/jobs/{job_id}/checkpoints")
    listed.raise_for_status()
    steps = tuple(sorted(row["step"] for row in listed.json() if row["committed"]))
    return FinishedJob(job_id, steps, round(time.monotonic() - started, 1))


def wait_for_job_end(client: httpx.Client, job_id: str, timeout_s: float = TRAIN_TIMEOUT_S) -> str:
    """The job's state once it ended (TimeoutError past `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = str(client.get(f"/jobs/{job_id}").json()["state"])
        if state in ENDED:
            return state
        time.sleep(0.5)
    raise TimeoutError(f"job {job_id} did not end within {timeout_s:.0f} s")
