"""Generation on a worker keeps recently used models loaded in one long-lived process.

A finished job stores the tiny Llama twice, as its final model and as checkpoint 2: two
stored models (two keys) of the same size, so a budget can hold exactly one of them.
Nothing trains here: the stored folders are full weights, as a full fine-tune stores them.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.app import API, AppHarness, make_settings, running_worker, start_harness
from tests.fixtures.stored_jobs import store_succeeded_job
from tests.waiting import wait_until
from tunedeck.worker import work_handlers
from tunedeck.worker.supervisor import Worker

pytestmark = pytest.mark.slow  # each test starts a generation process that imports torch and loads models

STEP = 2
PROMPT = "Hello there"


@pytest.fixture
def stored_job(tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path) -> Iterator[tuple[AppHarness, str]]:
    """Alice's succeeded job whose final model and checkpoint 2 are both the tiny Llama's full weights."""
    for harness in start_harness(make_settings(tmp_path, sqlite_url)):
        job_id = store_succeeded_job(
            harness, tiny_llama_dir, checkpoints={STEP: tiny_llama_dir}, final=tiny_llama_dir, name="full"
        )
        yield harness, job_id


@pytest.fixture
def fetches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The labels of the models workers download from storage from now on, in order."""
    fetched: list[str] = []
    original = work_handlers.fetch_job_model

    def counted(artifacts: Any, located: Any, dest: Path, **options: Any) -> dict[str, Any]:
        fetched.append(located.label)
        return original(artifacts, located, dest, **options)

    monkeypatch.setattr(work_handlers, "fetch_job_model", counted)
    return fetched


def _generate(api: AppHarness, job_id: str, step: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"prompt": PROMPT, "max_new_tokens": 4}
    if step is not None:
        body["checkpoint"] = step
    answer = api.client.post(f"{API}/jobs/{job_id}/generate?wait=120", headers=api.auth("alice"), json=body)
    assert answer.status_code == 200, answer.text
    item = answer.json()
    assert item["state"] == "succeeded", item
    return dict(item["result"])


def _killed(worker: Worker) -> int:
    """Kill the worker's generation process from outside, as the kernel's OOM killer would; its pid."""
    pid = worker.ctx.generation.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not worker.ctx.generation.alive, "the generation process to be gone")
    return pid


def test_a_second_prompt_to_the_same_model_is_answered_by_the_loaded_model(
    stored_job: tuple[AppHarness, str], fetches: list[str]
) -> None:
    api, job_id = stored_job
    with running_worker(api) as worker:
        cold = _generate(api, job_id)
        pid = worker.ctx.generation.pid
        warm = _generate(api, job_id)
        assert worker.ctx.generation.pid == pid  # the same process answered both
    assert cold["model_cached"] is False and cold["load_s"] > 0 and cold["model_bytes"] > 0
    assert warm["model_cached"] is True and warm["load_s"] == 0 and warm["model_bytes"] == cold["model_bytes"]
    assert warm["fine_tuned"] == cold["fine_tuned"]  # greedy decoding: the loaded model answers as a fresh one
    assert fetches == ["final"]  # fetched from storage once: the warm request downloaded nothing
    assert pid is not None and not worker.ctx.generation.alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the worker stopped: its generation process ended with it
    scratch = api.settings.data_dir / "runs" / "work"
    assert not scratch.exists() or list(scratch.iterdir()) == []  # downloads cleaned up


def test_the_least_recently_used_model_is_dropped_when_the_budget_holds_one(
    stored_job: tuple[AppHarness, str], fetches: list[str]
) -> None:
    api, job_id = stored_job
    with running_worker(api) as worker:
        worker.ctx.generation_cache_bytes = 0  # keeps nothing: every model is larger than the budget
        first = _generate(api, job_id)
        again = _generate(api, job_id)
        assert first["model_cached"] is False and again["model_cached"] is False  # answered, not kept
        size = int(first["model_bytes"])
        # Room for one model, not two; the process takes its budget when it starts.
        worker.ctx.generation_cache_bytes = size + size // 2
        _killed(worker)
        answers = [_generate(api, job_id, step) for step in (None, STEP, None, None, STEP)]
    assert [answer["model_cached"] for answer in answers] == [False, False, False, True, False]
    assert [answer["source"] for answer in answers] == ["final", f"step-{STEP}", "final", "final", f"step-{STEP}"]
    assert fetches == ["final", "final", "final", f"step-{STEP}", "final", f"step-{STEP}"]  # a fetch per miss only


def test_a_killed_generation_process_is_replaced_by_the_next_request(
    stored_job: tuple[AppHarness, str], fetches: list[str]
) -> None:
    api, job_id = stored_job
    with running_worker(api) as worker:
        before = _generate(api, job_id)
        assert _generate(api, job_id)["model_cached"] is True
        killed = _killed(worker)
        after = _generate(api, job_id)
        assert worker.ctx.generation.pid not in (None, killed)  # a fresh process
    assert after["model_cached"] is False and after["fine_tuned"] == before["fine_tuned"]
    assert fetches == ["final", "final"]  # the fresh process held nothing: fetched again
