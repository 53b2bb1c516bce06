"""Kinds' policies on the one work queue, on SQLite and PostgreSQL: registration, the default rules, the train rules."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from tests.fixtures.job_claims import claim_job
from tunedeck.core.errors import StateTransitionError
from tunedeck.core.states import JobState, WorkKind, WorkState
from tunedeck.store.kind_policy import ItemEnd, ItemPolicy
from tunedeck.store.models import Job, User, WorkItem
from tunedeck.store.store import JobStore
from tunedeck.store.train_policy import JobEnd, TrainPolicy
from tunedeck.store.types import utcnow
from tunedeck.store.work_item_moves import end_item
from tunedeck.store.work_queue import WorkQueue

CONFIG = {"epochs": 1}


@pytest.fixture
def alice(job_store: JobStore) -> User:
    return job_store.users.create_user("alice")


class EndsAtFirstLostLease(ItemPolicy):
    """A kind whose items never get a second attempt, and that records which hooks ran."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def on_claim(self, session: Session, item: WorkItem, token: str, now: datetime) -> None:
        self.calls.append("claim")

    def on_lease_lost(self, session: Session, item: WorkItem, now: datetime) -> str | None:
        self.calls.append("lease_lost")
        end_item(item, WorkState.FAILED, now, error={"detail": "no second attempt", "status": 503})
        return WorkState.FAILED

    def on_finish(self, session: Session, item: WorkItem, end: Any, now: datetime) -> None:
        self.calls.append("finish")
        super().on_finish(session, item, end, now)


def test_the_store_registers_the_train_policy_and_plain_kinds_follow_the_default(job_store: JobStore) -> None:
    queue = job_store.queue
    assert isinstance(queue.policy_for(WorkKind.TRAIN.value), TrainPolicy)
    plain = {type(queue.policy_for(kind.value)) for kind in WorkKind if kind is not WorkKind.TRAIN}
    assert plain == {ItemPolicy}
    with pytest.raises(ValueError, match="already has a policy"):
        queue.register(WorkKind.TRAIN.value, ItemPolicy())


def test_a_kind_without_a_policy_requeues_then_fails_and_ends_only_as_an_item(
    job_store: JobStore, alice: User
) -> None:
    item, _ = job_store.work.submit(alice, "inspect", {})
    start = utcnow()
    first = job_store.queue.claim("w1", ["inspect"], devices=0, lease_s=5, now=start)
    assert first is not None and first.job is None and first.attempt == 1
    beat = job_store.queue.heartbeat(item.id, first.fencing_token, 5, now=start)
    assert beat and beat.state is None and beat.requested_action is None
    with pytest.raises(TypeError):
        job_store.queue.finish(item.id, first.fencing_token, JobEnd(JobState.SUCCEEDED))  # a job's end, not an item's
    assert job_store.queue.release(item.id, first.fencing_token) == WorkState.QUEUED
    for attempt in (2, 3):
        claimed = job_store.queue.claim("w1", ["inspect"], devices=0, lease_s=5, now=start)
        assert claimed is not None and claimed.attempt == attempt
        expected = WorkState.QUEUED if attempt < 3 else WorkState.FAILED
        assert job_store.queue.requeue_expired(now=start + timedelta(seconds=10)) == [(item.id, expected)]
    assert job_store.work.get(alice, item.id).state == "failed"


def test_a_registered_policy_decides_for_its_kind_only(job_store: JobStore, alice: User) -> None:
    policy = EndsAtFirstLostLease()
    queue = WorkQueue(job_store.db)
    queue.register("generate", policy)
    generate, _ = job_store.work.submit(alice, "generate", {"prompt": "hi"})
    inspect, _ = job_store.work.submit(alice, "inspect", {})
    start = utcnow()
    for kind in ("generate", "inspect"):
        assert queue.claim("w1", [kind], devices=0, lease_s=5, now=start) is not None
    moved = queue.requeue_expired(now=start + timedelta(seconds=10))
    assert sorted(moved) == sorted([(generate.id, WorkState.FAILED), (inspect.id, WorkState.QUEUED)])
    assert policy.calls == ["claim", "lease_lost"]
    assert job_store.work.get(alice, generate.id).error == {"detail": "no second attempt", "status": 503}
    again = queue.claim("w2", ["inspect"], devices=0, lease_s=5)
    assert again is not None and queue.finish(inspect.id, again.fencing_token, ItemEnd.succeeded({"ok": True}))
    assert policy.calls == ["claim", "lease_lost"]  # the other kind's end is not its policy's


def test_the_train_policy_fails_a_job_whose_lease_expired_max_attempts_times(job_store: JobStore, alice: User) -> None:
    job = job_store.jobs.enqueue(alice, name="once", config=CONFIG, max_attempts=1)
    start = utcnow()
    claimed = claim_job(job_store, "w1", lease_s=5, now=start)
    assert claimed is not None and claimed.attempt == 1
    with pytest.raises(TypeError):
        job_store.queue.finish(claimed.item_id, claimed.fencing_token, ItemEnd.succeeded({}))  # an item's end
    assert job_store.queue.requeue_expired(now=start + timedelta(seconds=10)) == [(claimed.item_id, JobState.FAILED)]
    failed = job_store.jobs.get(alice, job.id)
    assert failed.state == JobState.FAILED and "lease expired 1 times (max_attempts=1)" in str(failed.error_message)
    (item,) = job_store.work.list_items(alice, job_id=job.id)
    assert (item.state, item.fencing_sha256) == ("failed", None) and "lease expired" in str(item.error)
    assert [entry.release_reason for entry in job_store.queue.fencing_log(job.id)] == ["lease_expired"]


def test_each_kind_s_policy_says_whether_its_owner_may_cancel(job_store: JobStore, alice: User) -> None:
    job = job_store.jobs.enqueue(alice, name="waiting", config=CONFIG)
    (train,) = job_store.work.list_items(alice, job_id=job.id)
    with pytest.raises(StateTransitionError, match="cancel the job"):
        job_store.queue.cancel(alice, train.id)
    delete, _ = job_store.work.submit(alice, "delete", {})
    with pytest.raises(StateTransitionError, match=f"work item {delete.id!r} removes what a deletion left behind"):
        job_store.queue.cancel(alice, delete.id)
    inspect, _ = job_store.work.submit(alice, "inspect", {})
    assert job_store.queue.cancel(alice, inspect.id).state == "cancelled"
    assert {item.state for item in (job_store.work.get(alice, train.id), job_store.work.get(alice, delete.id))} == {
        "queued"
    }


def test_a_train_item_whose_job_left_the_held_states_ends_without_a_report(job_store: JobStore, alice: User) -> None:
    job = job_store.jobs.enqueue(alice, name="moved", config=CONFIG)
    start = utcnow()
    claimed = claim_job(job_store, "w1", lease_s=5, now=start)
    assert claimed is not None
    with job_store.db.write() as session:  # an operator moved the job behind the worker's back
        session.execute(update(Job).where(Job.id == job.id).values(state=JobState.FAILED.value))
    assert not job_store.queue.heartbeat(claimed.item_id, claimed.fencing_token, 5, now=start)  # no longer held
    assert job_store.queue.requeue_expired(now=start + timedelta(seconds=10)) == []
    (item,) = job_store.work.list_items(alice, job_id=job.id)
    assert item.state == "cancelled" and item.error == {"detail": "the job is gone", "status": 404}
