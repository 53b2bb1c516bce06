"""While a real server's worker runs exports and generations, its routes still answer: none is held past a timeout.

Not a latency figure (`benchmarks/api_under_load.py` measures those): each request gets a
generous timeout that only a route blocked by the model work (a held database lock, a
busy event loop, a starved thread pool) would reach, even on a loaded 2-core machine.
The server is `tunedeck serve` in its own process, its embedded worker launching real
engine processes, on the database and storage of a finished job stored beforehand.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.app import API, BROWSER_BASE_URL, AppHarness, make_settings, sign_in, start_harness
from tests.fixtures.live_server import ServerProcess, server_env, start_server
from tests.waiting import HANG_S, wait_until
from tunedeck.core.states import WorkState

from .conftest import MID_RUN_STEP, QUESTION
from .stored_jobs import store_finished_job

pytestmark = pytest.mark.slow

ROUTE_TIMEOUT_S = 10.0
EXPORTS = ({"format": "adapter"}, {"format": "merged"}, {"format": "merged", "checkpoint": MID_RUN_STEP})
GENERATIONS = 2


@pytest.fixture
def served_job(
    tmp_path: Path, sqlite_url: str, lora_run: Path, tiny_llama_dir: Path
) -> Iterator[tuple[ServerProcess, AppHarness, str]]:
    """`tunedeck serve` (a work slot for every item) over alice's finished job, and the harness that stored it."""
    for harness in start_harness(make_settings(tmp_path, sqlite_url), base_url=BROWSER_BASE_URL):
        job_id = store_finished_job(harness, lora_run, tiny_llama_dir)
        items = str(len(EXPORTS) + GENERATIONS)
        env = server_env(harness.settings.data_dir, TUNEDECK_WORK_SLOTS=items, TUNEDECK_MAX_PENDING_WORK_PER_USER=items)
        env["TUNEDECK_DATABASE_URL"] = harness.settings.resolved_database_url()
        env["TUNEDECK_STORAGE_URL"] = harness.settings.resolved_storage_url()
        env["TUNEDECK_MODEL_ROOTS"] = str(harness.settings.model_roots)
        server = start_server(["serve", "--workers", "1", "--log-level", "warning"], env)
        try:
            server.wait_healthy()
            yield server, harness, job_id
        finally:
            server.stop()


def _items(harness: AppHarness, job_id: str) -> list[WorkState]:
    items = harness.store.work.list_items(harness.users["alice"], job_id=job_id, kinds=("export", "generate"))
    return [WorkState(item.state) for item in items]


def _running(harness: AppHarness, job_id: str) -> int:
    return sum(state is WorkState.RUNNING for state in _items(harness, job_id))


def test_no_route_is_held_while_exports_and_generations_run(
    served_job: tuple[ServerProcess, AppHarness, str],
) -> None:
    server, harness, job_id = served_job
    bearer = harness.auth("alice")
    # Every request below fails with a timeout error if the server holds it past ROUTE_TIMEOUT_S.
    with httpx.Client(base_url=server.url, timeout=ROUTE_TIMEOUT_S) as client:
        sign_in(client, harness.tokens["alice"])  # the dashboard's session cookie
        queued = [client.post(f"{API}/jobs/{job_id}/exports", headers=bearer, json=body) for body in EXPORTS]
        queued += [
            client.post(f"{API}/jobs/{job_id}/generate", headers=bearer, json={"prompt": f"{QUESTION} {index}"})
            for index in range(GENERATIONS)
        ]
        assert [answer.status_code for answer in queued] == [202] * len(queued), [a.text for a in queued]
        wait_until(lambda: _running(harness, job_id) >= 2, "two items running on the server's worker")

        routes = [
            (f"{API}/jobs", bearer),
            (f"{API}/health", {}),
            ("/jobs", {}),  # dashboard pages, signed in by cookie
            (f"/jobs/{job_id}", {}),
        ]
        rounds_while_running = 0
        deadline = time.monotonic() + HANG_S
        while _running(harness, job_id) > 0 and time.monotonic() < deadline:
            for path, headers in routes:
                answer = client.get(path, headers=headers)
                assert answer.status_code == 200, (path, answer.status_code, answer.text[:500])
            # A round counts only if work was still running once every route had answered.
            rounds_while_running += _running(harness, job_id) > 0
        assert rounds_while_running >= 1, "the work ended before one round of requests: nothing was under load"

    wait_until(
        lambda: all(state.is_terminal for state in _items(harness, job_id)), "every item to end", timeout_s=HANG_S
    )
    assert _items(harness, job_id) == [WorkState.SUCCEEDED] * len(queued), server.output()[-3000:]
