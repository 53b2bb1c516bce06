"""A fine-tuning script written for a hosted API, run unchanged against a live tunedeck server.

The official client (`base_url=<server>/v1`, `api_key=<tunedeck token>`) uploads a file,
fine-tunes a tiny Llama through the server's embedded worker, follows the job's events and
checkpoints, cancels a second job, lists the models and chats with the result, whole and
streamed, over real HTTP.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from openai import OpenAI

from tests.fixtures.live_server import LiveServer
from tests.integration.worker.seeding import TINY_JOB_CONFIG, chat_rows
from tests.waiting import HANG_S

pytestmark = pytest.mark.slow  # trains a tiny model on the live server's worker

# tunedeck keys the OpenAI fields do not set, sent through the client's `extra_body`.
_SET_BY_FIELDS = ("epochs", "batch_size", "gradient_accumulation_steps", "learning_rate")
SMALL_CONFIG = {key: value for key, value in TINY_JOB_CONFIG.items() if key not in _SET_BY_FIELDS}
TERMINAL = ("succeeded", "failed", "cancelled")


def test_a_hosted_api_script_fine_tunes_and_chats_unchanged(live_server: LiveServer) -> None:
    client = OpenAI(base_url=f"{live_server.url}/v1", api_key=live_server.token, max_retries=0, timeout=60)
    base_name = f"tiny-llama-{uuid.uuid4().hex[:6]}"  # the server is shared by the session's tests
    with live_server.api() as api:
        registered = api.post("/base-models", json={"name": base_name, "local_path": str(live_server.model_dir)})
        assert registered.status_code == 201, registered.text

    rows = "".join(json.dumps(row) + "\n" for row in chat_rows(8)).encode()
    uploaded = client.files.create(file=("arithmetic.jsonl", rows), purpose="fine-tune")
    assert uploaded.status == "processed" and uploaded.purpose == "fine-tune"

    job = client.fine_tuning.jobs.create(
        model=base_name,
        training_file=uploaded.id,
        suffix="sums",
        seed=7,
        hyperparameters={"n_epochs": 1, "batch_size": 2, "learning_rate_multiplier": 20},
        extra_body={"config": SMALL_CONFIG},
    )
    # A second job waits behind the first (one worker slot); the script changes its mind.
    spare = client.fine_tuning.jobs.create(model=base_name, training_file=uploaded.id, suffix="spare",
                                           extra_body={"config": SMALL_CONFIG})  # fmt: skip
    cancelled = client.fine_tuning.jobs.cancel(spare.id)
    assert cancelled.status == "cancelled"

    deadline = time.monotonic() + HANG_S
    while job.status not in TERMINAL and time.monotonic() < deadline:
        time.sleep(0.5)
        job = client.fine_tuning.jobs.retrieve(job.id)
    assert job.status == "succeeded", job
    assert job.fine_tuned_model == f"ft:{base_name}:sums:{job.id}"
    assert job.trained_tokens and job.trained_tokens > 0
    assert job.hyperparameters.n_epochs == 1 and job.hyperparameters.batch_size == 2
    assert client.fine_tuning.jobs.retrieve(spare.id).status == "cancelled"

    # Events newest first, as the client pages them; the training loss is among them.
    events = client.fine_tuning.jobs.list_events(job.id, limit=100).data
    assert [e.created_at for e in events] == sorted((e.created_at for e in events), reverse=True)
    losses = [e.data for e in events if e.type == "metrics" and e.data and "train_loss" in e.data]
    assert losses, [e.message for e in events]

    # 8 rows in batches of 2 = 4 steps, a checkpoint every 4 steps.
    checkpoints = client.fine_tuning.jobs.checkpoints.list(job.id).data
    assert [c.step_number for c in checkpoints] == [4]
    assert checkpoints[0].fine_tuned_model_checkpoint == f"{job.fine_tuned_model}:ckpt-step-4"
    assert checkpoints[0].metrics.step == 4 and checkpoints[0].metrics.train_loss is not None

    listed = {model.id for model in client.models.list()}
    assert {base_name, job.fine_tuned_model} <= listed

    question = [{"role": "user", "content": "What is 3 plus 3?"}]
    whole = client.chat.completions.create(model=job.fine_tuned_model, messages=question, temperature=0,
                                           max_tokens=12)  # fmt: skip
    answer = whole.choices[0].message.content
    assert answer and whole.model == job.fine_tuned_model
    assert whole.usage is not None and whole.usage.completion_tokens <= 12
    stream = client.chat.completions.create(
        model=job.fine_tuned_model, messages=question, temperature=0, max_tokens=12, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == answer
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    # A checkpoint answers by its own name too.
    at_checkpoint = client.chat.completions.create(
        model=checkpoints[0].fine_tuned_model_checkpoint, messages=question, temperature=0, max_tokens=4
    )
    assert at_checkpoint.choices[0].message.content
