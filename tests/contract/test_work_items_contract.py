"""Work items on SQLite and PostgreSQL: dedup, claim by kind and devices, fencing, leases, owner scoping."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tunedeck.core.errors import NotFoundError
from tunedeck.core.states import WorkState
from tunedeck.store.kind_policy import ItemEnd
from tunedeck.store.models import User
from tunedeck.store.store import JobStore
from tunedeck.store.types import utcnow


@pytest.fixture
def alice(job_store: JobStore) -> User:
    return job_store.users.create_user("alice")


def test_identical_requests_share_one_item_until_it_fails(job_store: JobStore, alice: User) -> None:
    identity = {"job": "j1", "format": "merged", "source": "final"}
    first, created = job_store.work.submit(alice, "export", {"format": "merged"}, identity=identity)
    again, created_again = job_store.work.submit(alice, "export", {"format": "merged"}, identity=identity)
    assert created and not created_again and again.id == first.id
    other, created_other = job_store.work.submit(alice, "export", {}, identity={**identity, "format": "adapter"})
    assert created_other and other.id != first.id
    claimed = job_store.queue.claim("w1", ["export"], devices=0, lease_s=60)
    assert claimed is not None and claimed.item_id == first.id
    disk_full = ItemEnd.failed({"detail": "disk full", "status": 503})
    assert job_store.queue.finish(first.id, claimed.fencing_token, disk_full)
    retried, created_retry = job_store.work.submit(alice, "export", {"format": "merged"}, identity=identity)
    assert created_retry and retried.id != first.id  # a failed item is not reused
    unkeyed = [job_store.work.submit(alice, "generate", {"prompt": "hi"})[0].id for _ in range(2)]
    assert unkeyed[0] != unkeyed[1]  # without an identity every request is its own item


def test_concurrent_identical_submissions_make_one_item(job_store: JobStore, alice: User) -> None:
    start = threading.Barrier(6)
    ids: list[str] = []

    def submit() -> None:
        start.wait()
        ids.append(job_store.work.submit(alice, "export", {}, identity={"same": True})[0].id)

    threads = [threading.Thread(target=submit) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 6 and len(set(ids)) == 1


def test_a_worker_claims_only_the_kinds_and_devices_it_has(job_store: JobStore, alice: User) -> None:
    gpu_preflight, _ = job_store.work.submit(alice, "preflight", {}, devices_needed=2)
    inspect, _ = job_store.work.submit(alice, "inspect", {})
    assert job_store.queue.claim("w1", ["export"], devices=8, lease_s=60) is None
    claimed = job_store.queue.claim("w1", ["preflight", "inspect"], devices=1, lease_s=60)
    assert claimed is not None and claimed.item_id == inspect.id
    assert job_store.queue.claim("w1", ["preflight"], devices=1, lease_s=60) is None
    claimed = job_store.queue.claim("w2", ["preflight"], devices=2, lease_s=60)
    assert claimed is not None and claimed.item_id == gpu_preflight.id and claimed.devices_needed == 2


def test_a_stale_token_changes_nothing_and_an_expired_lease_requeues_then_fails(
    job_store: JobStore, alice: User
) -> None:
    item, _ = job_store.work.submit(alice, "export", {}, identity={"x": 1})
    start = utcnow()
    first = job_store.queue.claim("w1", ["export"], devices=0, lease_s=5, now=start)
    assert first is not None and first.attempt == 1
    assert job_store.queue.requeue_expired(now=start + timedelta(seconds=10)) == [(item.id, WorkState.QUEUED)]
    second = job_store.queue.claim("w2", ["export"], devices=0, lease_s=5, now=start + timedelta(seconds=11))
    assert second is not None and second.attempt == 2
    # The first worker wakes up: its token no longer holds the item.
    assert not job_store.queue.heartbeat(item.id, first.fencing_token, 60)
    assert not job_store.queue.report_progress(item.id, first.fencing_token, {"phase": "x"})
    assert not job_store.queue.still_held(item.id, first.fencing_token)
    assert not job_store.queue.finish(item.id, first.fencing_token, ItemEnd.succeeded({"stale": True}))
    assert job_store.queue.still_held(item.id, second.fencing_token)
    assert job_store.queue.report_progress(item.id, second.fencing_token, {"phase": "writing", "done": 1, "total": 3})
    assert job_store.work.get(alice, item.id).progress == {"phase": "writing", "done": 1, "total": 3}
    later = start + timedelta(seconds=30)
    job_store.queue.requeue_expired(now=later)
    third = job_store.queue.claim("w3", ["export"], devices=0, lease_s=5, now=later)
    assert third is not None and third.attempt == 3
    assert job_store.queue.requeue_expired(now=later + timedelta(seconds=10)) == [(item.id, WorkState.FAILED)]
    failed = job_store.work.get(alice, item.id)
    assert failed.state == "failed" and "stopped heartbeating 3 times" in str(failed.error)
    assert failed.dedup_key is None


def test_success_keeps_the_result_release_requeues_and_cancel_ends(job_store: JobStore, alice: User) -> None:
    item, _ = job_store.work.submit(alice, "generate", {"prompt": "hi"})
    claimed = job_store.queue.claim("w1", ["generate"], devices=0, lease_s=60)
    assert claimed is not None and job_store.queue.release(item.id, claimed.fencing_token)
    assert job_store.work.get(alice, item.id).state == "queued"
    claimed = job_store.queue.claim("w1", ["generate"], devices=0, lease_s=60)
    hello = ItemEnd.succeeded({"text": "hello"})
    assert claimed is not None and job_store.queue.finish(item.id, claimed.fencing_token, hello)
    done = job_store.work.get(alice, item.id)
    assert done.state == "succeeded" and done.result == {"text": "hello"} and done.finished_at is not None
    other, _ = job_store.work.submit(alice, "generate", {"prompt": "bye"})
    assert job_store.queue.cancel(alice, other.id).state == "cancelled"
    assert job_store.queue.claim("w1", ["generate"], devices=0, lease_s=60) is None


def test_another_user_never_sees_an_item(job_store: JobStore, alice: User) -> None:
    bob = job_store.users.create_user("bob")
    item, _ = job_store.work.submit(alice, "inspect", {})
    for attempt in (lambda: job_store.work.get(bob, item.id), lambda: job_store.queue.cancel(bob, item.id)):
        with pytest.raises(NotFoundError):
            attempt()
    assert job_store.work.list_items(bob) == []
    assert [i.id for i in job_store.work.list_items(alice)] == [item.id]
    assert job_store.work.pending_count(alice.id, ["inspect"]) == 1
    assert job_store.work.pending_count(bob.id, ["inspect"]) == 0
