"""A worker process SIGKILLed between two removals of a deletion: the next worker finishes it, listing nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

from tests.waiting import wait_until
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.storage.base import dataset_prefix, job_prefix, user_prefix
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore

from .worker_process import kill_worker, start_worker_process

SHA = "d" * 64


def test_a_deletion_killed_midway_is_finished_by_the_next_worker(tmp_path: Path, sqlite_url: str) -> None:
    storage_url = (tmp_path / "artifacts").resolve().as_uri()
    artifacts = open_store(storage_url)
    store = JobStore.open(sqlite_url)
    alice = store.users.create_user("alice")
    dataset = store.datasets.create_dataset(alice, "chats")
    key = f"{dataset_prefix(alice.id, 'dsu_chats')}/data.jsonl"
    artifacts.put_bytes(key, b'{"text": "hi"}\n')
    version = store.datasets.add_version(alice, dataset.id, sha256=SHA, format="jsonl", rows=1, storage_key=key)
    job = store.jobs.enqueue(alice, name="tuned", config={"epochs": 1}, train_dataset_version_id=version.id)
    artifacts.put_bytes(f"{job_prefix(alice.id, job.id)}/final/model.safetensors", b"w" * 10)
    run_folder = tmp_path / "runs" / job.id / "attempt-1"
    run_folder.mkdir(parents=True)
    (run_folder / "events.jsonl").write_text("{}\n", encoding="utf-8")
    entry = tmp_path / "cache" / "tokenized" / "k1"
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text(json.dumps({"key": {"dataset": SHA}}), encoding="utf-8")
    receipt = request_deletion(store, alice, "dataset", dataset.id, with_models=True)

    first = start_worker_process(
        worker_id="w0", data_dir=tmp_path, database_url=sqlite_url, storage_url=storage_url, s3_endpoint=None,
        failpoints="deletion_after_removal",
    )
    try:
        assert first.wait(timeout=120) != 0  # killed by the failpoint after its first removal
    finally:
        kill_worker(first)
    halfway = store.deletions.get(alice, receipt.id)
    # Its folder sweep went first and removed the deleted job's run folder, on the receipt;
    # then the deletion's first removal, and the failpoint killed it.
    swept = {"where": "worker w0", "what": f"runs/{job.id}", "count": 1}
    assert swept.items() <= halfway.removed[-2].items() and not run_folder.exists()
    removed_by_first = [line for line in halfway.removed if line["where"] not in ("database", "worker w0")]
    assert halfway.state == "pending" and len(removed_by_first) == 1

    second = start_worker_process(
        worker_id="w1", data_dir=tmp_path, database_url=sqlite_url, storage_url=storage_url, s3_endpoint=None,
    )
    try:
        done = wait_until(lambda: (r := store.deletions.get(alice, receipt.id)).state == "done" and r,
                          "the second worker to finish the deletion", timeout_s=120)  # fmt: skip
    finally:
        kill_worker(second)
    places = [(line["where"], line["what"]) for line in done.removed]
    assert len(places) == len(set(places))
    assert removed_by_first[0] in done.removed  # counted once, by the worker that removed it
    assert ("worker w0", f"runs/{job.id}") in places and ("cache", "worker w1: k1") in places
    assert not (tmp_path / "runs" / job.id).exists() and not entry.exists()
    assert artifacts.list(user_prefix(alice.id)) == []
    store.close()
