"""Exports and generation of a stored job: API endpoints (owner only), CLI `--job`, storage commits."""

from __future__ import annotations

import io
import json
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from tests.fixtures.app import (
    API,
    AppHarness,
    jsonl_rows,
    make_settings,
    running_worker,
    start_harness,
    uploaded_id,
)
from tests.integration.worker.seeding import TINY_JOB_CONFIG
from tests.integration.worker.worker_process import kill_worker, start_worker_process
from tests.waiting import wait_until
from tunedeck.api.app import create_app
from tunedeck.cli.main import app
from tunedeck.core.states import JobState
from tunedeck.service.jobs.job_models import export_prefix
from tunedeck.storage.base import job_prefix
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore
from tunedeck.store.types import utcnow
from tunedeck.worker import work_handlers
from tunedeck.worker.supervisor import Worker

from .conftest import ANSWER, MID_RUN_STEP, QUESTION
from .stored_jobs import store_finished_job


@pytest.fixture
def stored_job(
    tmp_path: Path, sqlite_url: str, lora_run: Path, tiny_llama_dir: Path
) -> Iterator[tuple[AppHarness, str]]:
    """Alice's finished job on the tiny Llama, stored as a worker stores one (it trained `lora_run`).

    Checkpoint 4 committed, the final model, the run files a worker uploads when a job
    succeeds, and the job marked succeeded. Jobs still running: see `running_job`.
    """
    for harness in start_harness(make_settings(tmp_path, sqlite_url)):
        yield harness, store_finished_job(harness, lora_run, tiny_llama_dir)


@pytest.fixture
def running_job(tmp_path: Path, sqlite_url: str, tiny_llama_dir: Path) -> Iterator[tuple[AppHarness, str]]:
    """Alice's job trained by a real worker process that dies right after committing checkpoint 4.

    Nothing here uploads run files: whatever the job's record holds, the worker stored
    while the job ran. The job stays `running` (no worker is left to take it back).
    """
    for harness in start_harness(make_settings(tmp_path, sqlite_url)):
        dataset = harness.upload("alice", jsonl_rows(40), name="train")  # 20 steps at batch 2
        registration = {"name": "tiny", "local_path": str(tiny_llama_dir)}
        model = harness.client.post(f"{API}/base-models", headers=harness.auth("alice"), json=registration).json()
        config = {**TINY_JOB_CONFIG, "save_steps": MID_RUN_STEP}
        body = {
            "name": "mid-run",
            "base_model_id": model["id"],
            "train_dataset_id": uploaded_id(dataset),
            "config": config,
        }
        job = harness.client.post(f"{API}/jobs", headers=harness.auth("alice"), json=body)
        assert job.status_code == 201, job.text
        process = start_worker_process(
            worker_id="w-export",
            data_dir=tmp_path,
            database_url=sqlite_url,
            storage_url=harness.settings.resolved_storage_url(),
            s3_endpoint=None,
            failpoints="worker_after_commit",
            lease_seconds=600,
        )
        try:
            code = process.wait(timeout=120)
        finally:
            kill_worker(process)
        assert code == -9, (tmp_path / "w-export.log").read_text()
        yield harness, job.json()["id"]


def _post(api: AppHarness, user: str, path: str, body: dict[str, Any]) -> Any:
    return api.client.post(f"{API}{path}", headers=api.auth(user), json=body)


def test_another_users_job_is_not_found(stored_job: tuple[AppHarness, str]) -> None:
    api, job_id = stored_job
    assert _post(api, "bob", f"/jobs/{job_id}/generate", {"prompt": QUESTION}).status_code == 404
    assert _post(api, "bob", f"/jobs/{job_id}/exports", {"format": "adapter"}).status_code == 404
    assert api.client.get(f"{API}/jobs/{job_id}/exports", headers=api.auth("bob")).status_code == 404
    archive = api.client.get(f"{API}/jobs/{job_id}/exports/adapter-final/archive", headers=api.auth("bob"))
    assert archive.status_code == 404
    assert not api.artifacts.list(f"{job_prefix(api.users['alice'].id, job_id)}/exports")  # bob made nothing
    missing = _post(api, "alice", f"/jobs/{job_id}/generate", {"prompt": QUESTION, "checkpoint": 3})
    assert missing.status_code == 404
    both = _post(api, "alice", f"/jobs/{job_id}/generate", {"prompt": QUESTION, "messages": []})
    assert both.status_code == 422


@pytest.fixture
def worker(stored_job: tuple[AppHarness, str]) -> Iterator[Worker]:
    """A worker that runs the harness's work items (generations, exports)."""
    api, _ = stored_job
    with running_worker(api) as running:
        yield running


def _waited(api: AppHarness, user: str, path: str, body: dict[str, Any], wait: int = 120) -> Any:
    return api.client.post(f"{API}{path}?wait={wait}", headers=api.auth(user), json=body)


def test_owner_generates_side_by_side_from_a_committed_checkpoint(
    stored_job: tuple[AppHarness, str], worker: Worker
) -> None:
    api, job_id = stored_job
    queued = _post(api, "alice", f"/jobs/{job_id}/generate", {"prompt": QUESTION, "checkpoint": MID_RUN_STEP})
    assert queued.status_code == 202, queued.text  # answered at once: a worker runs it
    item = queued.json()
    assert item["kind"] == "generate" and item["state"] in ("queued", "running") and item["job_id"] == job_id
    done = api.client.get(f"{item['url']}?wait=120", headers=api.auth("alice")).json()
    assert done["state"] == "succeeded", done
    answer = done["result"]
    assert answer["source"] == f"step-{MID_RUN_STEP}" and answer["job_id"] == job_id
    assert answer["base"] is not None and answer["fine_tuned"]["new_tokens"] >= 1
    scratch = api.settings.data_dir / "runs" / "work"
    assert not scratch.exists() or list(scratch.iterdir()) == []  # downloads cleaned up
    assert api.client.get(item["url"], headers=api.auth("bob")).status_code == 404


def test_owner_exports_to_storage_and_downloads_it(stored_job: tuple[AppHarness, str], worker: Worker) -> None:
    api, job_id = stored_job
    created = _waited(api, "alice", f"/jobs/{job_id}/exports", {"format": "adapter"})
    assert created.status_code == 200, created.text
    item = created.json()
    assert item["state"] == "succeeded" and item["result"]["name"] == "adapter-final"
    export = api.client.get(f"{API}/jobs/{job_id}/exports/adapter-final", headers=api.auth("alice")).json()
    assert export["name"] == "adapter-final" and export["contents"] == "adapter"
    assert export["storage_prefix"] == f"{job_prefix(api.users['alice'].id, job_id)}/exports/adapter-final"
    assert api.artifacts.verify(export["storage_prefix"])  # committed, manifest last
    assert export["pin"]["source"] == "local"
    paths = {f["path"] for f in export["files"]}
    assert {"adapter_model.safetensors", "adapter_config.json", "tunedeck_pin.json", "README.md"} <= paths
    assert not any(path.endswith((".pt", ".pth")) for path in paths)

    download = api.client.get(export["archive_url"], headers=api.auth("alice"))
    assert download.status_code == 200 and download.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(download.content))
    assert json.loads(archive.read("tunedeck_pin.json")) == export["pin"]

    again = _post(api, "alice", f"/jobs/{job_id}/exports", {"format": "adapter"})
    assert again.status_code == 200 and again.json()["id"] == item["id"]  # the same item: not rebuilt
    listed = api.client.get(f"{API}/jobs/{job_id}/exports", headers=api.auth("alice")).json()
    assert [entry["name"] for entry in listed] == ["adapter-final"]


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The engine modules workers run from now on, in order."""
    ran: list[str] = []
    original = work_handlers.run_engine_module

    def counted(module: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        ran.append(module)
        return original(module, *args, **kwargs)

    monkeypatch.setattr(work_handlers, "run_engine_module", counted)
    return ran


def test_identical_concurrent_exports_build_once(
    stored_job: tuple[AppHarness, str], builds: list[str], worker: Worker
) -> None:
    api, job_id = stored_job
    start = threading.Barrier(3)

    def request() -> Any:
        start.wait()
        return _waited(api, "alice", f"/jobs/{job_id}/exports", {"format": "merged"})

    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda _: request(), range(3)))
    assert [answer.status_code for answer in answers] == [200, 200, 200], [a.text for a in answers]
    assert len({answer.json()["id"] for answer in answers}) == 1  # one item for the three requests
    assert builds == ["export"]
    assert api.artifacts.verify(answers[0].json()["result"]["storage_prefix"])


@pytest.fixture
def second_server(stored_job: tuple[AppHarness, str]) -> Iterator[TestClient]:
    """Another API server on the same database and storage as `stored_job`'s (its own pools)."""
    api, _ = stored_job
    store = JobStore.open(api.settings.resolved_database_url(), migrate=False)
    artifacts = open_store(api.settings.resolved_storage_url())
    try:
        with TestClient(create_app(api.settings, store=artifacts, job_store=store)) as client:
            yield client
    finally:
        store.close()


def test_identical_exports_on_two_servers_build_once(
    stored_job: tuple[AppHarness, str], second_server: TestClient, builds: list[str], worker: Worker
) -> None:
    api, job_id = stored_job
    start = threading.Barrier(2)

    def request(client: TestClient) -> Any:
        start.wait()
        return client.post(
            f"{API}/jobs/{job_id}/exports?wait=120", headers=api.auth("alice"), json={"format": "merged"}
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(request, (api.client, second_server)))
    assert [answer.status_code for answer in answers] == [200, 200], [a.text for a in answers]
    assert answers[0].json()["id"] == answers[1].json()["id"]
    assert builds == ["export"]
    assert api.artifacts.verify(answers[0].json()["result"]["storage_prefix"])


def test_an_export_whose_claim_was_taken_over_is_not_committed(
    stored_job: tuple[AppHarness, str], monkeypatch: pytest.MonkeyPatch, worker: Worker
) -> None:
    api, job_id = stored_job
    job = api.store.jobs.get(api.users["alice"], job_id)
    prefix = export_prefix(job.owner_id, job_id, "adapter-final")
    original = work_handlers.run_engine_module

    def taken_over_while_running(module: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        result = original(module, *args, **kwargs)
        # The worker was cut off past its lease (a long database outage): another worker took the item.
        api.store.queue.requeue_expired(now=utcnow() + timedelta(hours=1))
        assert api.store.queue.claim("other-worker", ["export"], devices=0, lease_s=600) is not None
        return result

    monkeypatch.setattr(work_handlers, "run_engine_module", taken_over_while_running)
    queued = _post(api, "alice", f"/jobs/{job_id}/exports", {"format": "adapter"}).json()
    wait_until(
        lambda: api.store.work.get(api.users["alice"], queued["id"]).worker_id == "other-worker",
        "the other worker to hold the item",
    )
    # The first worker, back from its engine run, finds its claim gone: once its thread ended, nothing may be there.
    wait_until(lambda: not worker.running_work, "the first worker to give up the item")
    assert api.artifacts.read_manifest(prefix) is None and not api.artifacts.list(prefix)
    item = api.store.work.get(api.users["alice"], queued["id"])
    assert item.state == "running" and item.worker_id == "other-worker"


def test_a_worker_killed_mid_export_leaves_nothing_and_another_worker_completes_it(
    stored_job: tuple[AppHarness, str],
) -> None:
    api, job_id = stored_job
    job = api.store.jobs.get(api.users["alice"], job_id)
    prefix = export_prefix(job.owner_id, job_id, "adapter-final")
    queued = _post(api, "alice", f"/jobs/{job_id}/exports", {"format": "adapter"}).json()
    # A worker that claimed the item and died: it neither heartbeats nor finishes.
    assert api.store.queue.claim("crashed-worker", ["export"], devices=0, lease_s=1.0) is not None
    with running_worker(api, worker_id="second-worker"):
        done = api.client.get(f"{queued['url']}?wait=120", headers=api.auth("alice")).json()
    assert done["state"] == "succeeded" and done["attempt"] == 2, done
    assert api.artifacts.verify(prefix)
    assert api.store.work.get(api.users["alice"], queued["id"]).worker_id == "second-worker"


def test_cli_exports_and_generates_from_a_stored_job(
    stored_job: tuple[AppHarness, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, job_id = stored_job
    monkeypatch.setenv("TUNEDECK_DATABASE_URL", api.settings.resolved_database_url())
    monkeypatch.setenv("TUNEDECK_STORAGE_URL", api.settings.resolved_storage_url())
    runner = CliRunner()
    out = tmp_path / "bundle"
    exported = runner.invoke(
        app, ["export", "--job", job_id, "--checkpoint", str(MID_RUN_STEP), "--format", "bundle", "--out", str(out)]
    )
    assert exported.exit_code == 0, exported.output
    assert [p.name for p in out.glob("*.tar.gz")] == [f"chat-tune-step-{MID_RUN_STEP}.tar.gz"]
    generated = runner.invoke(app, ["generate", "--job", job_id, "--prompt", QUESTION, "--json"])
    assert generated.exit_code == 0, generated.output
    assert json.loads(generated.stdout.strip().splitlines()[-1])["fine_tuned"]["text"] == ANSWER


def test_a_running_jobs_checkpoint_exports_with_the_record_the_worker_stored(
    running_job: tuple[AppHarness, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, job_id = running_job
    owner = api.users["alice"].id
    assert api.store.jobs.get(api.users["alice"], job_id).state == JobState.RUNNING.value
    assert [row.step for row in api.store.checkpoints.committed(job_id)] == [MID_RUN_STEP]
    stored = {key.rsplit("/", 1)[-1] for key in api.artifacts.list(f"{job_prefix(owner, job_id)}/run")}
    assert {"config.json", "env.json", "data_manifest.json"} <= stored
    assert "results.json" not in stored  # uploaded as the run started, not as it ended

    monkeypatch.setenv("TUNEDECK_DATABASE_URL", api.settings.resolved_database_url())
    monkeypatch.setenv("TUNEDECK_STORAGE_URL", api.settings.resolved_storage_url())
    out = tmp_path / "bundle"
    exported = CliRunner().invoke(
        app, ["export", "--job", job_id, "--checkpoint", str(MID_RUN_STEP), "--format", "bundle", "--out", str(out)]
    )
    assert exported.exit_code == 0, exported.output
    (archive,) = out.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        documents = {
            Path(member.name).name: json.load(tar.extractfile(member))  # type: ignore[arg-type]
            for member in tar.getmembers()
            if Path(member.name).name in ("env.json", "data_manifest.json", "config.json")
        }
    assert documents["env.json"]["packages"]  # the environment the worker's engine recorded
    dataset = api.store.datasets.list_datasets(api.users["alice"])[0]
    version = api.store.datasets.list_versions(api.users["alice"], dataset.id)[0]
    assert version.sha256 in json.dumps(documents["data_manifest.json"])  # the data this run trained on
    assert documents["config.json"]["config"]["save_steps"] == MID_RUN_STEP
