"""The queue on SQLite and PostgreSQL: order, device fit, concurrency, fencing, leases, checkpoints."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import timedelta
from typing import Any

import pytest

from tests.fixtures.job_claims import claim_job
from tunedeck.core.errors import StateTransitionError
from tunedeck.core.states import JobState
from tunedeck.store.records import ClaimedJob, MetricPoint
from tunedeck.store.store import JobStore
from tunedeck.store.train_policy import JobEnd
from tunedeck.store.types import utcnow

CONFIG = {"epochs": 1}


@pytest.fixture
def alice(job_store: JobStore):  # type: ignore[no-untyped-def]
    return job_store.users.create_user("alice")


def _claim(store: JobStore, worker: str = "w1", devices: int = 0, lease_s: float = 60) -> ClaimedJob:
    claimed = claim_job(store, worker, devices=devices, lease_s=lease_s)
    assert claimed is not None
    return claimed


def test_claim_order_is_priority_then_fifo(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    low_first = job_store.jobs.enqueue(alice, name="low-1", config=CONFIG, priority=0)
    high = job_store.jobs.enqueue(alice, name="high", config=CONFIG, priority=5)
    low_second = job_store.jobs.enqueue(alice, name="low-2", config=CONFIG, priority=0)
    mid = job_store.jobs.enqueue(alice, name="mid", config=CONFIG, priority=2)
    order = [_claim(job_store).job_id for _ in range(4)]
    assert order == [high.id, mid.id, low_first.id, low_second.id]
    assert claim_job(job_store, "w1", devices=0, lease_s=60) is None


def test_claim_sets_lease_attempt_token_and_log(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    job = job_store.jobs.enqueue(alice, name="one", config=CONFIG)
    now = utcnow()
    claimed = claim_job(job_store, "w1", devices=1, lease_s=30, now=now)
    assert claimed is not None
    assert claimed.attempt == 1 and claimed.resume_from is None and claimed.config["epochs"] == 1
    assert claimed.fencing_token not in repr(claimed)
    row = job_store.jobs.get(alice, job.id)
    assert row.state == JobState.RUNNING and row.worker_id == "w1"
    # The job waited and runs as a train item of the one work queue: the item holds the lease.
    (item,) = job_store.work.list_items(alice, job_id=job.id)
    assert (item.kind, item.state, item.worker_id, item.attempt) == ("train", "running", "w1", 1)
    assert item.lease_until == job_store.queue.lease_until(claimed.item_id) == now + timedelta(seconds=30)
    assert item.fencing_sha256 is not None and claimed.fencing_token not in item.fencing_sha256
    log = job_store.queue.fencing_log(job.id)
    assert [(e.worker_id, e.attempt, e.released_at) for e in log] == [("w1", 1, None)]


def test_workers_claim_only_jobs_that_fit_their_devices(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    big = job_store.jobs.enqueue(alice, name="big", config=CONFIG, devices_needed=4, priority=9)
    cpu = job_store.jobs.enqueue(alice, name="cpu", config=CONFIG, devices_needed=0)
    assert _claim(job_store, devices=1).job_id == cpu.id  # the bigger, higher-priority job does not fit
    assert claim_job(job_store, "w1", devices=2, lease_s=60) is None
    assert _claim(job_store, "w2", devices=4).job_id == big.id


def test_concurrent_claimers_never_share_a_job(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    jobs = {job_store.jobs.enqueue(alice, name=f"j{i}", config=CONFIG).id for i in range(24)}
    claims: dict[str, list[str]] = {f"w{i}": [] for i in range(4)}
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def worker(name: str) -> None:
        try:
            start.wait()
            while (claimed := claim_job(job_store, name, devices=0, lease_s=60)) is not None:
                claims[name].append(claimed.job_id)
        except BaseException as error:  # recorded and asserted below: a thread cannot fail the test itself
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(name,)) for name in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    everything = [job for got in claims.values() for job in got]
    assert sorted(everything) == sorted(jobs), "every job claimed exactly once"
    for job_id in jobs:
        assert len(job_store.queue.fencing_log(job_id)) == 1


def test_stale_token_changes_nothing(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    job = job_store.jobs.enqueue(alice, name="one", config=CONFIG)
    first = _claim(job_store, "w1", lease_s=10)
    later = utcnow() + timedelta(seconds=11)
    assert job_store.queue.requeue_expired(now=later) == [(first.item_id, JobState.QUEUED)]
    second = claim_job(job_store, "w2", devices=0, lease_s=60, now=later)
    assert second is not None and second.attempt == 2 and second.fencing_token != first.fencing_token

    stale = first.fencing_token
    assert not job_store.queue.heartbeat(first.item_id, stale, lease_s=60)
    assert job_store.queue.finish(first.item_id, stale, JobEnd(JobState.SUCCEEDED)) is False
    assert job_store.queue.release(first.item_id, stale) is None
    assert job_store.checkpoints.record_written(job.id, stale, 10, "p/10") is False
    assert job_store.checkpoints.prune(job.id, stale, keep=1) == []
    assert job_store.telemetry.append_metrics(job.id, [MetricPoint("loss", 1, 1.0)], token=stale) == 0
    row = job_store.jobs.get(alice, job.id)
    assert row.state == JobState.RUNNING and row.worker_id == "w2"
    assert job_store.checkpoints.list_for_job(alice, job.id) == []

    # The current holder can commit; the stale one still cannot, even for its own written step.
    assert job_store.checkpoints.record_written(job.id, second.fencing_token, 10, "p/10")
    assert job_store.checkpoints.mark_committed(job.id, stale, 10, "f" * 64) is False
    assert job_store.checkpoints.newest_committed_checkpoint(job.id) is None
    assert job_store.checkpoints.mark_committed(job.id, second.fencing_token, 10, "f" * 64)
    assert job_store.checkpoints.newest_committed_checkpoint(job.id).step == 10  # type: ignore[union-attr]
    assert job_store.queue.finish(second.item_id, second.fencing_token, JobEnd(JobState.SUCCEEDED))
    again = job_store.queue.finish(second.item_id, second.fencing_token, JobEnd(JobState.FAILED))
    assert again is False  # already released

    log = job_store.queue.fencing_log(job.id)
    assert [(e.worker_id, e.attempt, e.release_reason) for e in log] == [
        ("w1", 1, "lease_expired"),
        ("w2", 2, "succeeded"),
    ]
    assert log[0].released_at is not None and log[0].released_at <= log[1].claimed_at


def test_lease_expiry_requeues_then_fails_at_max_attempts(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    job = job_store.jobs.enqueue(alice, name="flaky", config=CONFIG, max_attempts=2)
    clock = utcnow()
    claimed = claim_job(job_store, "w1", devices=0, lease_s=5, now=clock)
    assert claimed is not None
    assert job_store.queue.requeue_expired(now=clock + timedelta(seconds=4)) == []  # still leased
    assert job_store.queue.heartbeat(claimed.item_id, claimed.fencing_token, 5, now=clock + timedelta(seconds=4))
    assert job_store.queue.requeue_expired(now=clock + timedelta(seconds=8)) == []  # heartbeat extended it
    clock += timedelta(seconds=10)
    assert job_store.queue.requeue_expired(now=clock) == [(claimed.item_id, JobState.QUEUED)]
    assert job_store.jobs.get(alice, job.id).worker_id is None

    again = claim_job(job_store, "w2", devices=0, lease_s=5, now=clock)
    assert again is not None and again.attempt == 2
    assert job_store.queue.requeue_expired(now=clock + timedelta(seconds=6)) == [(again.item_id, JobState.FAILED)]
    failed = job_store.jobs.get(alice, job.id)
    assert failed.state == JobState.FAILED
    assert "lease expired 2 times" in (failed.error_message or "") and "'w2'" in (failed.error_message or "")
    assert claim_job(job_store, "w3", devices=0, lease_s=5) is None

    # Resuming gives a fresh budget of attempts.
    job_store.jobs.resume(alice, job.id)
    third = claim_job(job_store, "w3", devices=0, lease_s=5, now=clock)
    assert third is not None and third.attempt == 3
    assert job_store.queue.requeue_expired(now=clock + timedelta(seconds=6)) == [(third.item_id, JobState.QUEUED)]


def test_lost_hold_honours_requested_cancel_and_pause(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    cancel_me = job_store.jobs.enqueue(alice, name="c", config=CONFIG, priority=1)
    pause_me = job_store.jobs.enqueue(alice, name="p", config=CONFIG)
    first = _claim(job_store)
    second = _claim(job_store)
    assert first.job_id == cancel_me.id
    job_store.jobs.request_cancel(alice, cancel_me.id)
    assert job_store.jobs.get(alice, cancel_me.id).state == JobState.RUNNING  # until the worker acts
    job_store.jobs.request_pause(alice, pause_me.id)
    assert job_store.queue.release(first.item_id, first.fencing_token) is JobState.CANCELLED
    moved = job_store.queue.requeue_expired(now=utcnow() + timedelta(hours=1))
    assert second.job_id == pause_me.id and moved == [(second.item_id, JobState.PAUSED)]
    assert job_store.queue.heartbeat(second.item_id, second.fencing_token, lease_s=60).ok is False


def test_release_keeps_the_place_in_line(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    first = job_store.jobs.enqueue(alice, name="first", config=CONFIG)
    job_store.jobs.enqueue(alice, name="second", config=CONFIG)
    claimed = _claim(job_store)
    assert job_store.queue.release(claimed.item_id, claimed.fencing_token) is JobState.QUEUED
    assert _claim(job_store, "w2").job_id == first.id


def test_finish_checks_the_state_machine(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    job = job_store.jobs.enqueue(alice, name="one", config=CONFIG)
    claimed = _claim(job_store)
    with pytest.raises(StateTransitionError):
        job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.PAUSED))  # never asked to pause
    with pytest.raises(ValueError):
        job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.RUNNING))
    diagnosis = {"kind": "oom", "advice": "lower batch_size"}
    end = JobEnd("failed", error="out of memory", diagnosis=diagnosis)
    assert job_store.queue.finish(claimed.item_id, claimed.fencing_token, end)
    row = job_store.jobs.get(alice, job.id)
    assert row.state == JobState.FAILED and row.error_message == "out of memory" and row.diagnosis == diagnosis
    assert row.finished_at is not None
    (item,) = job_store.work.list_items(alice, job_id=job.id)
    assert (item.state, item.fencing_sha256, item.error) == ("failed", None, {"detail": "out of memory", "status": 503})


def test_checkpoints_commit_resume_and_retention(job_store: JobStore, alice) -> None:  # type: ignore[no-untyped-def]
    job = job_store.jobs.enqueue(alice, name="ckpt", config=CONFIG)
    claimed = _claim(job_store)
    token = claimed.fencing_token
    for step in (10, 20, 30, 40):
        assert job_store.checkpoints.record_written(job.id, token, step, f"p/{step}", metrics={"eval_loss": step})
        assert job_store.checkpoints.mark_committed(job.id, token, step, f"{step:064d}", is_best=step == 20)
    assert job_store.checkpoints.record_written(job.id, token, 50, "p/50")  # crash before commit
    removed = job_store.checkpoints.prune(job.id, token, keep=2)
    assert sorted(r.step for r in removed) == [10]
    remaining = {c.step: c for c in job_store.checkpoints.list_for_job(alice, job.id)}
    assert sorted(remaining) == [20, 30, 40, 50] and remaining[20].is_best and remaining[50].state == "written"

    # The job dies; the next claim resumes from the newest committed checkpoint, not the written one.
    job_store.queue.requeue_expired(now=utcnow() + timedelta(hours=1))
    resumed = _claim(job_store, "w2")
    assert resumed.resume_from is not None and resumed.resume_from.step == 40
    assert resumed.resume_from.storage_prefix == "p/40" and resumed.resume_from.manifest_sha256 == f"{40:064d}"
    assert [c.step for c in job_store.checkpoints.committed(job.id)] == [40, 30, 20]
    assert job_store.jobs.get(alice, job.id).resume_from_step == 40


def _claim_in_child(url: str, worker: str, start: Any, out: Any) -> None:
    """A worker process: its own engine, claiming until the queue is empty."""
    from tunedeck.store.db import Database

    store = JobStore(Database.connect(url))
    got = []
    start.wait()
    while (claimed := claim_job(store, worker, devices=0, lease_s=60)) is not None:
        got.append(claimed.job_id)
    store.close()
    out.put(got)


def test_claimers_in_separate_processes_never_share_a_job(
    job_store: JobStore,
    alice,  # type: ignore[no-untyped-def]
    database_url: str,
) -> None:
    # Threads in one process share a writer lock on SQLite; processes contend on the database itself.
    jobs = {job_store.jobs.enqueue(alice, name=f"j{i}", config=CONFIG).id for i in range(16)}
    context = multiprocessing.get_context("fork")
    start = context.Barrier(4)
    out = context.Queue()
    children = [context.Process(target=_claim_in_child, args=(database_url, f"p{i}", start, out)) for i in range(4)]
    for child in children:
        child.start()
    results = [out.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    everything = [job for got in results for job in got]
    assert sorted(everything) == sorted(jobs), "every job claimed exactly once"
    assert {row.worker_id for row in job_store.jobs.list(alice, limit=50).items} <= {f"p{i}" for i in range(4)}
