"""What the browser tests train on: a base model and a chat dataset registered through the API, tiny CPU runs.

Every e2e file shares one session server, so each passes names of its own to `register_inputs`
and picks its inputs by the ids it gets back, never by position in a list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fixtures.live_server import LiveServer
from tests.waiting import wait_until
from tunedeck.core.states import JobState

JOB_S = 300  # a tiny CPU run, on a loaded machine, from queued to its end


@dataclass(frozen=True)
class Inputs:
    """A registered base model and chat dataset, by id."""

    base_model_id: str
    dataset_id: str


def tiny_run(**overrides: Any) -> dict[str, Any]:
    """A fresh config for a run that trains in seconds on a CPU: one epoch, no checks first, a rank-4 LoRA.

    `overrides` replace or add keys (`tiny_run(epochs=2, save_steps=3)`).
    """
    return {
        "epochs": 1,
        "batch_size": 2,
        "max_length": 64,
        "mixed_precision": "fp32",
        "gradient_checkpointing": False,
        "logging_steps": 1,
        "preflight": False,
        "eval_strategy": "no",
        "lora_r": 4,
        **overrides,
    }


def _say_number(i: int) -> tuple[str, str]:
    """The default exchange of row `i`: asked to say a number, the assistant says it."""
    return f"Say {i}.", str(i)


def jsonl(rows: Iterable[dict[str, Any]]) -> bytes:
    """`rows` as JSONL bytes, one JSON object a line."""
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def chat_rows(count: int, exchange: Callable[[int], tuple[str, str]] = _say_number) -> bytes:
    """`count` chat rows as JSONL bytes, each one user turn and one assistant turn.

    `exchange(i)` gives row `i`'s (question, answer), for a file whose test reads its own wording.
    """
    return jsonl(
        {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]}
        for question, answer in map(exchange, range(count))
    )


def register_base_model(server: LiveServer, name: str, local_path: Path | None = None) -> str:
    """Register the model folder at `local_path` (by default the server's tiny model) as base model `name`; its id."""
    folder = server.model_dir if local_path is None else local_path
    with server.api() as api:
        model = api.post("/base-models", json={"name": name, "local_path": str(folder)})
    assert model.status_code == 201, model.text
    return str(model.json()["id"])


def upload_dataset(server: LiveServer, name: str, rows: bytes, *, filename: str = "train.jsonl") -> str:
    """Upload `rows` as dataset `name` and wait for it to be ingested; its id."""
    with server.api() as api:
        dataset = api.post("/datasets", params={"wait": 120}, files={"file": (filename, rows)}, data={"name": name})
    assert dataset.status_code == 200, dataset.text
    return str(dataset.json()["result"]["dataset_id"])


def register_inputs(
    server: LiveServer, model_name: str, dataset_name: str, rows: bytes, *, filename: str = "train.jsonl"
) -> Inputs:
    """Register the server's tiny model as base model `model_name` and upload `rows` as dataset `dataset_name`."""
    return Inputs(
        base_model_id=register_base_model(server, model_name),
        dataset_id=upload_dataset(server, dataset_name, rows, filename=filename),
    )


def create_job(server: LiveServer, inputs: Inputs, name: str, config: dict[str, Any], **fields: Any) -> str:
    """Create job `name` training on `inputs` with `config` (and any other job `fields`, such as tags); its id."""
    body = {
        "name": name,
        "base_model_id": inputs.base_model_id,
        "train_dataset_id": inputs.dataset_id,
        "config": config,
        **fields,
    }
    with server.api() as api:
        job = api.post("/jobs", json=body)
    assert job.status_code == 201, job.text
    return str(job.json()["id"])


def wait_terminal(server: LiveServer, job_id: str, *, timeout_s: float = JOB_S) -> dict[str, Any]:
    """The job's JSON once it has ended (succeeded, failed or cancelled); AssertionError after `timeout_s`."""

    def ended() -> dict[str, Any]:
        """The job's JSON once it has ended; an empty (falsy) dict while it lives."""
        with server.api() as api:
            job: dict[str, Any] = api.get(f"/jobs/{job_id}").json()
        return job if JobState(job["state"]).is_terminal else {}

    return wait_until(ended, f"job {job_id} to end", timeout_s=timeout_s, poll_s=0.5)


def create_plan(server: LiveServer, experiment_id: str, variant_names: tuple[str, str]) -> str:
    """A rental plan for the experiment on one H100: its two variants named (the second for 3 epochs); its id."""
    first, second = variant_names
    body = {
        "experiment_id": experiment_id,
        "machine": {"device_type": "H100", "device_count": 1},
        "variants": [{"name": first}, {"name": second, "epochs": 3}],
        "train_rows": 8_000,
        "validation_rows": 400,
        "test_rows": 400,
        "model_params": 7e9,
        "price_per_hour": 2.5,
    }
    with server.api() as api:
        plan = api.post("/plans", json=body)
    assert plan.status_code == 201, plan.text
    return str(plan.json()["id"])
