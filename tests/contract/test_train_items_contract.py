"""Jobs on the one work queue, on SQLite and PostgreSQL: a job waits and runs as a `train` item."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fixtures.job_claims import claim_job
from tunedeck.core.errors import StateTransitionError
from tunedeck.core.states import JobState
from tunedeck.store.models import User
from tunedeck.store.store import JobStore
from tunedeck.store.train_policy import JobEnd
from tunedeck.store.types import utcnow

CONFIG = {"epochs": 1}


@pytest.fixture
def alice(job_store: JobStore) -> User:
    return job_store.users.create_user("alice")


def _items(store: JobStore, user: User, job_id: str) -> list[tuple[str, str]]:
    """(state, result or error detail) of the job's train items, oldest first."""
    items = sorted(store.work.list_items(user, job_id=job_id), key=lambda item: item.id)
    assert all(item.kind == "train" for item in items)
    return [(item.state, str((item.result or item.error or {}).get("job_state") or (item.error or {}).get("detail")))
            for item in items]  # fmt: skip


def test_one_claim_takes_jobs_and_other_work_by_priority_then_age(job_store: JobStore, alice: User) -> None:
    export, _ = job_store.work.submit(alice, "export", {"format": "merged"})
    job = job_store.jobs.enqueue(alice, name="later but urgent", config=CONFIG, priority=3)
    plain = job_store.jobs.enqueue(alice, name="plain", config=CONFIG)
    kinds = ("train", "export")
    order = [job_store.queue.claim("w1", kinds, devices=0, lease_s=60) for _ in range(3)]
    assert [(c.kind, c.job_id if c.kind == "train" else c.item_id) for c in order if c is not None] == [
        ("train", job.id),  # priority first
        ("export", export.id),  # then first in, first out, whatever the kind
        ("train", plain.id),
    ]
    first = order[0]
    assert first is not None and first.job is not None
    assert first.job.fencing_token == first.fencing_token and first.job.attempt == 1
    assert job_store.jobs.get(alice, job.id).state == JobState.RUNNING
    # A worker asking only for other kinds never starts a job.
    again = job_store.jobs.enqueue(alice, name="again", config=CONFIG)
    assert job_store.queue.claim("w2", ("export", "generate"), devices=0, lease_s=60) is None
    assert job_store.jobs.get(alice, again.id).state == JobState.QUEUED


def test_a_train_item_follows_its_job_through_pause_resume_cancel(job_store: JobStore, alice: User) -> None:
    job = job_store.jobs.enqueue(alice, name="j", config=CONFIG)
    assert _items(job_store, alice, job.id) == [("queued", "None")]
    (item,) = job_store.work.list_items(alice, job_id=job.id)
    with pytest.raises(StateTransitionError, match="cancel the job"):
        job_store.queue.cancel(alice, item.id)  # the job decides: its checkpoints are kept
    claimed = claim_job(job_store, "w1", devices=0, lease_s=60)
    assert claimed is not None
    job_store.jobs.request_pause(alice, job.id)
    assert job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.PAUSED))
    assert _items(job_store, alice, job.id) == [("succeeded", "paused")]
    job_store.jobs.resume(alice, job.id)
    assert _items(job_store, alice, job.id) == [("succeeded", "paused"), ("queued", "None")]
    job_store.jobs.request_cancel(alice, job.id)  # queued: at once, with its item
    assert job_store.jobs.get(alice, job.id).state == JobState.CANCELLED
    assert _items(job_store, alice, job.id) == [("succeeded", "paused"), ("cancelled", "cancelled by its owner")]
    assert claim_job(job_store, "w1", devices=0, lease_s=60) is None


def test_a_released_or_expired_job_keeps_its_place_in_line(job_store: JobStore, alice: User) -> None:
    first = job_store.jobs.enqueue(alice, name="first", config=CONFIG)
    second = job_store.jobs.enqueue(alice, name="second", config=CONFIG)
    now = utcnow()
    claimed = claim_job(job_store, "w1", devices=0, lease_s=5, now=now)
    assert claimed is not None and claimed.job_id == first.id
    assert job_store.queue.requeue_expired(now=now + timedelta(seconds=10)) == [(claimed.item_id, JobState.QUEUED)]
    assert job_store.queue.requeue_expired(now=now + timedelta(seconds=10)) == []  # taken back once, by the job's rules
    assert not job_store.queue.heartbeat(claimed.item_id, claimed.fencing_token, 60)  # the old token holds nothing
    again = claim_job(job_store, "w2", devices=0, lease_s=60)
    assert again is not None and again.job_id == first.id and again.attempt == 2
    assert job_store.queue.release(again.item_id, again.fencing_token) is JobState.QUEUED
    assert [c.job_id for c in (claim_job(job_store, "w3", devices=0, lease_s=60),) if c] == [first.id]
    assert job_store.jobs.get(alice, second.id).state == JobState.QUEUED


def test_a_job_on_several_machines_waits_for_a_worker_that_reaches_them(job_store: JobStore, alice: User) -> None:
    wide = job_store.jobs.enqueue(alice, name="two machines", config={"machines": 2})
    assert claim_job(job_store, "one-machine", devices=8, lease_s=60) is None
    claimed = claim_job(job_store, "ray-front", devices=8, lease_s=60, machines=2)
    assert claimed is not None and claimed.job_id == wide.id
