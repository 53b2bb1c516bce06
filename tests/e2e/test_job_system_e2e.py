"""The job page's System section follows a training job: the stream's samples extend its charts without a reload,
and the section the server renders at the end is drawn in their place."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.dashboard_inputs import chat_rows, create_job, register_inputs, tiny_run, wait_terminal
from tests.fixtures.live_server import LiveServer
from tests.waiting import wait_until

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.timeout(900)
MODEL_NAME = "system-live-llama"  # names of this file's own on the session server the dashboard tests share
DATASET_NAME = "system-live-train"
HELD_RUN = tiny_run(epochs=3)
JOB_S = 240  # a tiny CPU run, on a loaded machine, from queued to its end
SAMPLE_MS = 60_000  # the server samples every 15 s by default: one more sample, on a loaded machine


@pytest.fixture
def held_job(live_server: LiveServer) -> Iterator[str]:
    """A job held at its second step, released (and ended) after the test whatever happened in it."""
    live_server.hold_training_from(2)
    try:
        inputs = register_inputs(live_server, MODEL_NAME, DATASET_NAME, chat_rows(8))
        job_id = create_job(live_server, inputs, "system live run", HELD_RUN)
        yield job_id
    finally:
        live_server.release_training()

    wait_terminal(live_server, job_id, timeout_s=JOB_S)


def _has_system_sample(live_server: LiveServer, job_id: str) -> bool:
    with live_server.api() as api:
        return bool(api.get(f"/jobs/{job_id}/events", params={"type": "system"}).json())


def test_system_charts_grow_while_the_job_trains(page: Page, live_server: LiveServer, held_job: str) -> None:
    wait_until(live_server.training_held_at, "the run to reach the held step", timeout_s=JOB_S)
    # The section is drawn from the first stored sample on: a run can reach its held step before one is stored.
    wait_until(lambda: _has_system_sample(live_server, held_job), "a first system sample", timeout_s=SAMPLE_MS / 1000)
    page.goto(f"{live_server.url}/jobs/{held_job}")
    expect(page.locator("#job-data")).to_have_attribute("data-ready", "true")
    page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloads
    cpu = page.locator("#system [data-system='cpu_percent']")
    expect(cpu).to_have_attribute("data-loaded", "true")
    first = int(cpu.get_attribute("data-points") or "0")
    assert first >= 1
    expect(cpu.locator("canvas")).to_have_count(1)  # uPlot drew the chart in its container
    expect(cpu).to_have_attribute("data-points", str(first + 1), timeout=SAMPLE_MS)
    expect(page.locator("#system [data-system='memory_used_mb']")).to_have_attribute(
        "data-points", str(first + 1)
    )
    assert page.evaluate("() => window.sameDocument === true")
    shoot(page, "job-system-live")
    # Once the job ends, the section comes back from the server with every reading and is drawn again.
    live_server.release_training()
    expect(page.locator("#job-data")).to_have_attribute("data-outcome", "succeeded", timeout=JOB_S * 1000)
    cpu = page.locator("#system [data-system='cpu_percent']")
    expect(cpu).to_have_attribute("data-loaded", "true")
    expect(cpu.locator("canvas")).to_have_count(1)
    assert int(cpu.get_attribute("data-points") or "0") >= first + 1
    assert page.evaluate("() => window.sameDocument === true")
    shoot(page, "job-system-ended")
