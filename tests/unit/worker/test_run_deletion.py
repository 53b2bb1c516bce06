"""The `delete` work item on a worker: every copy goes, once, and a worker killed midway is finished by the next."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.app import API, AppHarness
from tunedeck.core.states import WorkState
from tunedeck.storage.base import dataset_prefix, job_prefix, upload_prefix
from tunedeck.store.models import DatasetVersion
from tunedeck.store.types import utcnow
from tunedeck.worker import work_handlers
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import build_context
from tunedeck.worker.work_runner import WorkExecution

CONFIG = {"epochs": 1, "batch_size": 2, "learning_rate": 1e-4}


class Killed(BaseException):
    """Stands in for the SIGKILL a real failpoint sends: nothing in the worker catches it."""


def _worker(api: AppHarness, worker_id: str = "w-del") -> WorkerContext:
    return build_context(api.settings, store=api.store, artifacts=api.artifacts, max_concurrent_jobs=0,
                         worker_id=worker_id)  # fmt: skip


def _cache_entry(cache_dir: Path, key: str, dataset_sha: str) -> Path:
    entry = cache_dir / key
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text(json.dumps({"key": {"dataset": dataset_sha}}), encoding="utf-8")
    (entry / "input_ids.npy").write_bytes(b"x" * 100)
    return entry


def _version(api: AppHarness, user: str, name: str, sha: str, dataset_id: str | None = None) -> DatasetVersion:
    """A stored dataset version (rows and file) made directly, as an ingestion would leave it."""
    owner = api.users[user]
    dataset_id = dataset_id or api.store.datasets.create_dataset(owner, name).id
    key = f"{dataset_prefix(owner.id, f'dsu_{name}')}/data.jsonl"
    api.artifacts.put_bytes(key, b'{"text": "hi"}\n')
    return api.store.datasets.add_version(owner, dataset_id, sha256=sha, format="jsonl", rows=1, storage_key=key)


def _plant(api: AppHarness, ctx: WorkerContext) -> dict[str, Any]:
    """A job trained on alice's data, with copies everywhere; bob keeps a version of the same content.

    Alice's dataset has a second version of content nobody else has: its cache entry is hers alone.
    """
    alice = api.users["alice"]
    version = _version(api, "alice", "chats", "a" * 64)
    _version(api, "alice", "chats-2", "b" * 64, dataset_id=version.dataset_id)
    _version(api, "bob", "same", "a" * 64)
    job = api.store.jobs.enqueue(alice, name="trained", config=CONFIG, train_dataset_version_id=version.id)
    run = ctx.runs_dir / job.id / "attempt-1" / "run"
    run.mkdir(parents=True)
    (run / "adapter.safetensors").write_bytes(b"w" * 64)
    api.artifacts.put_bytes(f"{job_prefix(alice.id, job.id)}/final/model.bin", b"m" * 32)
    assert ctx.cache_dir is not None
    return {
        "job": {"id": job.id},
        "run": ctx.runs_dir / job.id,
        "own_entry": _cache_entry(ctx.cache_dir, "k-alice", "b" * 64),
        "shared_entry": _cache_entry(ctx.cache_dir, "k-shared", "a" * 64),
        "dataset_id": version.dataset_id,
    }


def _rerun(api: AppHarness, receipt_id: str, **extra: Any) -> None:
    """Queue the receipt's deletion again (as a second claim of the same item would run it)."""
    alice = api.users["alice"]
    inputs = api.store.work.get(alice, api.store.deletions.get(alice, receipt_id).work_item_id or "").inputs
    api.store.work.submit(alice, "delete", {**inputs, **extra})


def _run_one(ctx: WorkerContext, now: Any = None) -> WorkState | None:
    claimed = ctx.store.queue.claim(ctx.worker_id, ["delete"], 0, ctx.lease_s, now=now)
    assert claimed is not None
    return WorkExecution(ctx, claimed).run()


def test_a_deletion_reaches_storage_run_folders_and_caches_but_keeps_a_shared_cache(api: AppHarness) -> None:
    ctx = _worker(api)
    planted = _plant(api, ctx)
    alice = api.users["alice"]
    refused = api.client.delete(f"{API}/datasets/{planted['dataset_id']}", headers=api.auth("alice"))
    assert refused.status_code == 409 and planted["job"]["id"] in refused.json()["detail"]
    assert refused.json()["issues"][0]["found"] == planted["job"]["id"]

    answer = api.client.delete(f"{API}/datasets/{planted['dataset_id']}?with_models=true", headers=api.auth("alice"))
    assert answer.status_code == 202
    assert _run_one(ctx) == WorkState.SUCCEEDED

    receipt = api.client.get(answer.headers["Location"], headers=api.auth("alice")).json()
    assert receipt["state"] == "done"
    places = {(line["where"], line["what"]): line for line in receipt["removed"]}
    assert not planted["run"].exists() and places[("worker w-del", f"runs/{planted['job']['id']}")]["bytes"] == 64
    assert not planted["own_entry"].exists() and places[("cache", "worker w-del: k-alice")]["count"] == 2
    assert planted["shared_entry"].exists()  # bob's version has the same content
    assert api.artifacts.list(f"users/{alice.id}") == []
    assert api.artifacts.list(f"users/{api.users['bob'].id}") != []
    assert api.client.get(f"{API}/jobs/{planted['job']['id']}", headers=api.auth("alice")).status_code == 404


def test_running_a_deletion_twice_removes_nothing_twice(api: AppHarness) -> None:
    ctx = _worker(api)
    planted = _plant(api, ctx)
    alice = api.users["alice"]
    answer = api.client.delete(f"{API}/jobs/{planted['job']['id']}", headers=api.auth("alice"))
    assert answer.status_code == 202
    assert _run_one(ctx) == WorkState.SUCCEEDED
    first = api.store.deletions.get(alice, answer.json()["id"]).removed
    assert {line["where"] for line in first} == {"database", "storage", "worker w-del"}
    upload = upload_prefix(alice.id, "upl_left")
    api.artifacts.put_bytes(f"{upload}/raw.jsonl", b"{}")
    _rerun(api, answer.json()["id"], upload_prefixes=[upload])
    assert _run_one(ctx) == WorkState.SUCCEEDED
    second = api.store.deletions.get(alice, answer.json()["id"]).removed
    assert second == [*first, {"where": "uploads", "what": upload, "count": 1, "bytes": 2}]
    assert planted["shared_entry"].exists() and planted["own_entry"].exists()  # a job deletion keeps the data


def test_a_worker_killed_between_two_removals_is_finished_by_the_next_claim(
    api: AppHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = _worker(api)
    planted = _plant(api, ctx)
    answer = api.client.delete(f"{API}/jobs/{planted['job']['id']}", headers=api.auth("alice"))
    receipt_id = answer.json()["id"]
    fired: list[str] = []

    def kill_once(name: str, **_: Any) -> None:
        if not fired:
            fired.append(name)
            raise Killed(name)

    monkeypatch.setattr(work_handlers, "failpoint", kill_once)
    with pytest.raises(Killed):
        _run_one(ctx)
    assert fired == ["deletion_after_removal"]
    halfway = api.store.deletions.get(api.users["alice"], receipt_id)
    assert halfway.state == "pending" and [line["where"] for line in halfway.removed][-1] == "storage"
    assert planted["run"].exists()  # the second removal never happened

    later = utcnow() + timedelta(seconds=ctx.lease_s + 5)
    assert api.store.queue.requeue_expired(now=later) == [(halfway.work_item_id, WorkState.QUEUED)]
    assert _run_one(_worker(api, "w-next"), now=later) == WorkState.SUCCEEDED
    done = api.store.deletions.get(api.users["alice"], receipt_id)
    assert done.state == "done" and not planted["run"].exists()
    storage_lines = [line for line in done.removed if line["where"] == "storage"]
    assert len(storage_lines) == 1 and storage_lines[0]["count"] == 1
