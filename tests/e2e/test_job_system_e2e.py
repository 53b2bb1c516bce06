"""The job page's System section follows a training job: the stream's samples extend its charts without a reload."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import shoot
from tests.fixtures.live_server import LiveServer
from tests.waiting import wait_until
from tunedeck.core.states import JobState

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.timeout(900)
MODEL_NAME = "system-live-llama"  # names of this file's own on the session server the dashboard tests share
DATASET_NAME = "system-live-train"
HELD_RUN = {
    "epochs": 3,
    "batch_size": 2,
    "max_length": 64,
    "mixed_precision": "fp32",
    "gradient_checkpointing": False,
    "logging_steps": 1,
    "preflight": False,
    "eval_strategy": "no",
    "lora_r": 4,
}
JOB_S = 240  # a tiny CPU run, on a loaded machine, from queued to its end
SAMPLE_MS = 60_000  # the server samples every 15 s by default: one more sample, on a loaded machine


@pytest.fixture
def held_job(live_server: LiveServer) -> Iterator[str]:
    """A job held at its second step, released (and ended) after the test whatever happened in it."""
    rows = "".join(
        json.dumps({"messages": [{"role": "user", "content": f"Say {i}."}, {"role": "assistant", "content": str(i)}]})
        + "\n"
        for i in range(8)
    )
    live_server.hold_training_from(2)
    try:
        with live_server.api() as api:
            model = api.post("/base-models", json={"name": MODEL_NAME, "local_path": str(live_server.model_dir)})
            assert model.status_code == 201, model.text
            dataset = api.post("/datasets", params={"wait": 120}, files={"file": ("train.jsonl", rows.encode())},
                               data={"name": DATASET_NAME})  # fmt: skip
            assert dataset.status_code == 200, dataset.text
            job = api.post(
                "/jobs",
                json={
                    "name": "system live run",
                    "base_model_id": model.json()["id"],
                    "train_dataset_id": dataset.json()["result"]["dataset_id"],
                    "config": HELD_RUN,
                },
            )
            assert job.status_code == 201, job.text
            job_id = str(job.json()["id"])
        yield job_id
    finally:
        live_server.release_training()

    def ended() -> bool:
        with live_server.api() as api:
            return JobState(api.get(f"/jobs/{job_id}").json()["state"]).is_terminal

    wait_until(ended, "the job to end", timeout_s=JOB_S, poll_s=0.5)


def test_system_charts_grow_while_the_job_trains(page: Page, live_server: LiveServer, held_job: str) -> None:
    wait_until(live_server.training_held_at, "the run to reach the held step", timeout_s=JOB_S)
    page.goto(f"{live_server.url}/jobs/{held_job}")
    expect(page.locator("#job-data")).to_have_attribute("data-ready", "true")
    page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloads
    cpu = page.locator("#system canvas[data-system='cpu_percent']")
    expect(cpu).to_have_attribute("data-loaded", "true")
    first = int(cpu.get_attribute("data-points") or "0")
    assert first >= 1
    expect(cpu).to_have_attribute("data-points", str(first + 1), timeout=SAMPLE_MS)
    expect(page.locator("#system canvas[data-system='memory_used_mb']")).to_have_attribute(
        "data-points", str(first + 1)
    )
    assert page.evaluate("() => window.sameDocument === true")
    shoot(page, "job-system-live")
