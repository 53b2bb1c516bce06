"""An export's work item counts what it moves: the model's bytes fetched and the export's bytes committed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.app import API, AppHarness, make_settings, start_harness
from tunedeck.storage.base import final_prefix

from .stored_jobs import store_finished_job

PHASES = ["fetching the model", "exporting", "committing"]


@pytest.fixture
def stored_job(
    tmp_path: Path, sqlite_url: str, lora_run: Path, tiny_llama_dir: Path
) -> Iterator[tuple[AppHarness, str]]:
    """Alice's finished LoRA job on the tiny Llama, stored as a worker stores one."""
    for harness in start_harness(make_settings(tmp_path, sqlite_url)):
        yield harness, store_finished_job(harness, lora_run, tiny_llama_dir)


@pytest.fixture
def reported(stored_job: tuple[AppHarness, str], monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every progress a work item reports from now on, in order (still recorded on the item)."""
    api, _ = stored_job
    seen: list[dict[str, Any]] = []
    record = api.store.queue.report_progress

    def recording(item_id: str, token: str, progress: dict[str, Any]) -> bool:
        seen.append(dict(progress))
        return record(item_id, token, progress)

    monkeypatch.setattr(api.store.queue, "report_progress", recording)
    return seen


def test_an_exports_progress_counts_the_bytes_it_fetches_and_commits(
    stored_job: tuple[AppHarness, str], reported: list[dict[str, Any]]
) -> None:
    api, job_id = stored_job
    queued = api.client.post(f"{API}/jobs/{job_id}/exports", headers=api.auth("alice"), json={"format": "adapter"})
    assert queued.status_code == 202, queued.text
    assert api.run_work(("export",)) == 1  # on this thread, as a worker runs it
    item = api.client.get(queued.json()["url"], headers=api.auth("alice")).json()
    assert item["state"] == "succeeded", item
    export = api.client.get(f"{API}/jobs/{job_id}/exports/adapter-final", headers=api.auth("alice")).json()

    phases = [p["phase"] for p in reported]
    assert phases == sorted(phases, key=PHASES.index), phases
    model = api.artifacts.read_manifest(final_prefix(api.users["alice"].id, job_id))
    assert model is not None
    fetching = [p for p in reported if p["phase"] == "fetching the model"]
    _assert_counted(fetching, model.total_bytes, len(model.files))

    committing = [p for p in reported if p["phase"] == "committing"]
    assert committing[0] == {"phase": "committing"}  # said at once, while the files are hashed
    _assert_counted(committing[1:], export["total_bytes"], len(export["files"]))
    total = export["total_bytes"]
    # What a client reads once the item ended: the bar full.
    assert item["progress"] == {"phase": "committing", "done": total, "total": total, "unit": "bytes"}


def _assert_counted(reports: list[dict[str, Any]], total: int, files: int) -> None:
    """From 0 to `total` bytes, rising, reported before the first file and after each of the `files`."""
    assert len(reports) == files + 1, reports
    assert all(p["total"] == total and p["unit"] == "bytes" for p in reports), reports
    done = [p["done"] for p in reports]
    assert done[0] == 0 and done[-1] == total and done == sorted(done), done


def test_a_generations_progress_counts_the_model_bytes_it_fetches_once(
    stored_job: tuple[AppHarness, str], reported: list[dict[str, Any]]
) -> None:
    api, job_id = stored_job
    body = {"prompt": "Hello", "max_new_tokens": 4, "compare_base": False}
    for _ in range(2):
        queued = api.client.post(f"{API}/jobs/{job_id}/generate", headers=api.auth("alice"), json=body)
        assert queued.status_code == 202, queued.text
        assert api.run_work(("generate",)) == 1
        item = api.client.get(queued.json()["url"], headers=api.auth("alice")).json()
        assert item["state"] == "succeeded", item
    model = api.artifacts.read_manifest(final_prefix(api.users["alice"].id, job_id))
    assert model is not None
    fetching = [p for p in reported if p["phase"] == "fetching the model" and "done" in p]
    # The second prompt finds the model loaded in the worker's generation process: nothing is fetched again.
    _assert_counted(fetching, model.total_bytes, len(model.files))
