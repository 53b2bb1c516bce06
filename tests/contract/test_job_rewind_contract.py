""""Resume from here": rewinding a job to an earlier committed checkpoint, on both databases."""

from __future__ import annotations

import pytest

from tests.fixtures.job_claims import claim_job
from tunedeck.core.errors import NotFoundError, StateTransitionError
from tunedeck.core.states import JobState
from tunedeck.store.quotas import QuotaExceededError
from tunedeck.store.records import ClaimedJob, MetricPoint
from tunedeck.store.store import JobStore
from tunedeck.store.train_policy import JobEnd


def _job_with_checkpoints(store: JobStore) -> tuple[object, ClaimedJob]:
    user = store.users.create_user("rewinder")
    job = store.jobs.enqueue(user, name="rewind", config={"epochs": 1})
    claimed = claim_job(store, "w", devices=0, lease_s=60)
    assert claimed is not None
    for step in (2, 4, 6):
        assert store.checkpoints.record_written(job.id, claimed.fencing_token, step, f"ckpt/{step}")
        assert store.checkpoints.mark_committed(job.id, claimed.fencing_token, step, "0" * 64)
    store.telemetry.append_metrics(job.id, [MetricPoint("loss", step, 1.0 / step) for step in range(1, 8)])
    return user, claimed


def test_resume_from_drops_later_checkpoints_and_points_then_claims_from_there(job_store: JobStore) -> None:
    user, claimed = _job_with_checkpoints(job_store)
    job = job_store.jobs.list(user).items[0]
    with pytest.raises(StateTransitionError):
        job_store.jobs.resume_from(user, job.id, 4)  # running: pause or cancel it first
    assert job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.FAILED, error="crashed"))

    with pytest.raises(NotFoundError):
        job_store.jobs.resume_from(user, job.id, 3)  # no committed checkpoint there
    resumed, dropped = job_store.jobs.resume_from(user, job.id, 4)
    assert resumed.state == JobState.QUEUED and resumed.resume_from_step == 4
    assert list(dropped) == ["ckpt/6"]
    assert [c.step for c in job_store.checkpoints.committed(job.id)] == [4, 2]
    assert [step for step, _ in job_store.telemetry.series(user, job.id, "loss")] == [1, 2, 3, 4]

    again = claim_job(job_store, "w2", devices=0, lease_s=60)
    assert again is not None and again.resume_from is not None and again.resume_from.step == 4


def test_another_user_cannot_rewind(job_store: JobStore) -> None:
    user, claimed = _job_with_checkpoints(job_store)
    job = job_store.jobs.list(user).items[0]
    job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.FAILED, error="crashed"))
    stranger = job_store.users.create_user("stranger")
    with pytest.raises(NotFoundError):
        job_store.jobs.resume_from(stranger, job.id, 4)


def test_a_refused_resume_from_keeps_every_checkpoint_and_point(job_store: JobStore) -> None:
    user, claimed = _job_with_checkpoints(job_store)
    job = job_store.jobs.list(user).items[0]
    job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.FAILED, error="crashed"))
    job_store.quotas.set("*", {"queued_jobs": 0}, by=user.id)
    with pytest.raises(QuotaExceededError):
        job_store.jobs.resume_from(user, job.id, 4)
    # The rewind and the resume are one transaction: the refusal undid the rewind too.
    assert [c.step for c in job_store.checkpoints.committed(job.id)] == [6, 4, 2]
    assert [step for step, _ in job_store.telemetry.series(user, job.id, "loss")] == list(range(1, 8))
    assert job_store.jobs.get(user, job.id).state == JobState.FAILED
