"""Per-user quotas on SQLite and PostgreSQL: checked when a job joins the queue and when a worker claims it."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.fixtures.job_claims import claim_job
from tunedeck.store.models import User
from tunedeck.store.quotas import EVERYONE, QuotaExceededError
from tunedeck.store.store import JobStore
from tunedeck.store.train_policy import JobEnd
from tunedeck.store.types import utcnow

CONFIG = {"epochs": 1}


@pytest.fixture
def users(job_store: JobStore) -> tuple[User, User, User]:
    """alice and bob (members) and root (an admin who sets the quotas)."""
    return (
        job_store.users.create_user("alice"),
        job_store.users.create_user("bob"),
        job_store.users.create_user("root", admin=True),
    )


def test_queued_jobs_limit_refuses_the_next_job_naming_the_limit_and_its_use(
    job_store: JobStore, users: tuple[User, User, User]
) -> None:
    alice, bob, root = users
    job_store.quotas.set(EVERYONE, {"queued_jobs": 2}, by=root.id)
    first = job_store.jobs.enqueue(alice, name="a1", config=CONFIG)
    job_store.jobs.enqueue(alice, name="a2", config=CONFIG)
    with pytest.raises(QuotaExceededError) as refused:
        job_store.jobs.enqueue(alice, name="a3", config=CONFIG)
    message = str(refused.value)
    assert "alice" in message and "queued jobs" in message and "2 of 2 waiting" in message
    assert "tunedeck users quota alice --queued-jobs" in message
    with pytest.raises(QuotaExceededError):
        job_store.jobs.clone_with_changes(alice, first.id, changes={})
    assert job_store.quotas.usage(alice.id).queued_jobs == 2  # nothing was half-queued
    job_store.jobs.enqueue(bob, name="b1", config=CONFIG)  # bob has his own count
    # A paused or cancelled job resumed joins the queue again: it counts like a new one.
    job_store.jobs.request_cancel(alice, first.id)
    job_store.jobs.enqueue(alice, name="a3", config=CONFIG)
    with pytest.raises(QuotaExceededError):
        job_store.jobs.resume(alice, first.id)


def test_a_users_own_row_overrides_everyones_and_an_empty_field_inherits(
    job_store: JobStore, users: tuple[User, User, User]
) -> None:
    alice, bob, root = users
    job_store.quotas.set(EVERYONE, {"queued_jobs": 1, "running_jobs": 4}, by=root.id)
    job_store.quotas.set(alice.id, {"queued_jobs": 3}, by=root.id)
    limits = job_store.quotas.limits_for(alice.id)
    assert (limits.queued_jobs, limits.running_jobs, limits.storage_bytes) == (3, 4, None)
    assert job_store.quotas.limits_for(bob.id).queued_jobs == 1
    settings = job_store.quotas.set(alice.id, {"queued_jobs": None}, by=root.id)
    assert settings.queued_jobs is None and settings.updated_by == root.id
    assert job_store.quotas.limits_for(alice.id).queued_jobs == 1


def test_running_jobs_limit_makes_the_owner_wait_while_others_are_served(
    job_store: JobStore, users: tuple[User, User, User]
) -> None:
    alice, bob, root = users
    job_store.quotas.set(alice.id, {"running_jobs": 1}, by=root.id)
    a1 = job_store.jobs.enqueue(alice, name="a1", config=CONFIG)
    a2 = job_store.jobs.enqueue(alice, name="a2", config=CONFIG)
    b1 = job_store.jobs.enqueue(bob, name="b1", config=CONFIG)
    first = claim_job(job_store, "w1", devices=0, lease_s=60)
    second = claim_job(job_store, "w2", devices=0, lease_s=60)
    assert first is not None and second is not None
    assert (first.job_id, second.job_id) == (a1.id, b1.id)  # a2 is older than b1 but alice is at her limit
    assert claim_job(job_store, "w3", devices=0, lease_s=60) is None
    reason = job_store.quotas.waiting_reason(alice.id, lambda _user: 0)
    assert reason == "running jobs: 1 of 1 in use"
    job_store.queue.finish(first.item_id, first.fencing_token, JobEnd("succeeded"))
    third = claim_job(job_store, "w3", devices=0, lease_s=60)
    assert third is not None and third.job_id == a2.id


def test_device_hours_in_the_period_are_counted_from_claims_and_stop_new_work(
    job_store: JobStore, users: tuple[User, User, User]
) -> None:
    alice, _bob, root = users
    job_store.quotas.set(alice.id, {"device_hours": 1.5, "period_days": 7}, by=root.id)
    start = utcnow() - timedelta(hours=3)
    job = job_store.jobs.enqueue(alice, name="gpu", config=CONFIG, devices_needed=2)
    waiting = job_store.jobs.enqueue(alice, name="next", config=CONFIG)
    claimed = claim_job(job_store, "w1", devices=2, lease_s=60, now=start)
    assert claimed is not None and claimed.job_id == job.id
    half_hour = start + timedelta(minutes=30)
    job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd("succeeded"), now=half_hour)
    # Two devices for half an hour: one device-hour, under the limit.
    assert job_store.quotas.usage(alice.id).device_hours == pytest.approx(1.0)
    again = job_store.jobs.clone_with_changes(alice, job.id, changes={})
    claimed = claim_job(job_store, "w1", devices=2, lease_s=60, now=start + timedelta(hours=1))
    assert claimed is not None and claimed.job_id == waiting.id  # CPU job, counted as one device
    job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd("succeeded"), now=start + timedelta(hours=2))
    assert job_store.quotas.usage(alice.id).device_hours == pytest.approx(2.0)
    assert claim_job(job_store, "w1", devices=2, lease_s=60) is None
    with pytest.raises(QuotaExceededError, match=r"device-hours \(2\.00 of 1\.5 used in the last 7 days\)"):
        job_store.jobs.enqueue(alice, name="more", config=CONFIG)
    # Eight days later the spent hours have left the period: the waiting clone runs.
    later = utcnow() + timedelta(days=8)
    claimed = claim_job(job_store, "w1", devices=2, lease_s=60, now=later)
    assert claimed is not None and claimed.job_id == again.id


def test_storage_limit_is_checked_with_the_measured_bytes_at_queueing_and_at_claim(
    job_store: JobStore, users: tuple[User, User, User]
) -> None:
    alice, bob, root = users
    job_store.quotas.set(EVERYONE, {"storage_bytes": 1000}, by=root.id)
    with pytest.raises(QuotaExceededError, match=r"stored bytes \(1000 of 1000 in use\)"):
        job_store.jobs.enqueue(alice, name="full", config=CONFIG, stored_bytes=1000)
    queued = job_store.jobs.enqueue(alice, name="ok", config=CONFIG, stored_bytes=999)
    job_store.jobs.enqueue(bob, name="bob", config=CONFIG, stored_bytes=0)
    stored = {alice.id: 5000, bob.id: 10}
    measured: list[str] = []

    def meter(user_id: str) -> int:
        measured.append(user_id)
        return stored[user_id]

    over = job_store.quotas.owners_over_storage(meter)
    assert over == frozenset({alice.id}) and sorted(measured) == sorted([alice.id, bob.id])
    claimed = claim_job(job_store, "w1", devices=0, lease_s=60, skip_owners=over)
    assert claimed is not None and claimed.owner_id == bob.id
    assert job_store.quotas.waiting_reason(alice.id, meter) == "stored bytes: 5000 of 1000 in use"
    stored[alice.id] = 0
    over = job_store.quotas.owners_over_storage(meter)
    claimed = claim_job(job_store, "w1", devices=0, lease_s=60, skip_owners=over)
    assert claimed is not None and claimed.job_id == queued.id


def test_no_quota_set_means_no_limit_and_no_storage_measured(
    job_store: JobStore, users: tuple[User, User, User]
) -> None:
    alice, _bob, _root = users
    for index in range(5):
        job_store.jobs.enqueue(alice, name=f"j{index}", config=CONFIG)

    def meter(user_id: str) -> int:
        raise AssertionError("storage is measured only for users with a storage limit")

    assert job_store.quotas.owners_over_storage(meter) == frozenset()
    assert job_store.quotas.waiting_reason(alice.id, meter) is None
    assert claim_job(job_store, "w1", devices=0, lease_s=60) is not None


def test_requests_at_once_cannot_both_take_the_last_queued_place(
    job_store: JobStore, users: tuple[User, User, User]
) -> None:
    alice, _bob, root = users
    job_store.quotas.set(alice.id, {"queued_jobs": 3}, by=root.id)
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def enqueue(index: int) -> None:
        start.wait()
        try:
            job_store.jobs.enqueue(alice, name=f"racing-{index}", config=CONFIG)
            outcomes.append("queued")
        except QuotaExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=enqueue, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["queued"] * 3 + ["refused"] * 5
    assert job_store.quotas.usage(alice.id).queued_jobs == 3
