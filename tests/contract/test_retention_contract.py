"""Retention policies on SQLite and PostgreSQL: the plan (a dry run) and the sweep that does exactly what it lists.

The clock is passed in: nothing sleeps.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from tunedeck.core.errors import ConfigError, NotFoundError
from tunedeck.core.ids import new_id
from tunedeck.service.privacy.retention_plan import deletion_schedule, plan_retention
from tunedeck.service.privacy.retention_sweep import apply_retention
from tunedeck.storage.base import ArtifactStore, checkpoint_prefix, dataset_prefix, job_prefix
from tunedeck.storage.factory import open_store
from tunedeck.store.models import Checkpoint, DatasetVersion, Job, User
from tunedeck.store.retention import RetentionBounds
from tunedeck.store.store import JobStore
from tunedeck.store.types import utcnow

BOUNDS = RetentionBounds()
CONFIG = {"epochs": 1}


@pytest.fixture
def artifacts(tmp_path: Path) -> ArtifactStore:
    """A local artifact folder."""
    return open_store((tmp_path / "artifacts").as_uri())


@pytest.fixture
def alice(job_store: JobStore) -> User:
    """The owner whose things are kept or deleted."""
    return job_store.users.create_user("alice")


def _version(store: JobStore, artifacts: ArtifactStore, owner: User, name: str = "chat") -> DatasetVersion:
    """A stored version of a new dataset `name` (its data file in storage)."""
    dataset = store.datasets.find_by_name(owner, name) or store.datasets.create_dataset(owner, name)
    key = f"{dataset_prefix(owner.id, new_id('dsu_'))}/data.jsonl"
    artifacts.put_bytes(key, b'{"text": "hello"}\n')
    version = store.datasets.add_version(owner, dataset.id, sha256="0" * 64, format="jsonl", rows=1, storage_key=key)
    return version


def _folder(version: DatasetVersion) -> str:
    """The storage folder of a version's raw data (ingestion names it after the upload)."""
    return version.storage_key.rsplit("/", 1)[0]


def _set_job(store: JobStore, job_id: str, **values: object) -> None:
    with store.db.write() as session:
        session.execute(update(Job).where(Job.id == job_id).values(**values))


def _set_version(store: JobStore, version_id: str, **values: object) -> None:
    with store.db.write() as session:
        session.execute(update(DatasetVersion).where(DatasetVersion.id == version_id).values(**values))


def _finished_job(
    store: JobStore, owner: User, version: DatasetVersion | None, finished_at: datetime, state: str = "succeeded"
) -> Job:
    job = store.jobs.enqueue(
        owner, name=f"job-{new_id('x')[-6:]}", config=CONFIG,
        train_dataset_version_id=version.id if version else None,
    )  # fmt: skip
    _set_job(store, job.id, state=state, finished_at=finished_at, created_at=finished_at - timedelta(hours=1))
    return job


def _checkpoints(store: JobStore, artifacts: ArtifactStore, job: Job, steps: list[int], best: int) -> None:
    with store.db.write() as session:
        for step in steps:
            prefix = checkpoint_prefix(job.owner_id, job.id, step)
            artifacts.put_bytes(f"{prefix}/weights.safetensors", b"w")
            session.add(Checkpoint(
                id=new_id("ckpt_"), job_id=job.id, step=step, storage_prefix=prefix, state="committed",
                is_best=step == best, created_at=utcnow(), committed_at=utcnow(),
            ))  # fmt: skip
    artifacts.put_bytes(f"{job_prefix(job.owner_id, job.id)}/final/model.safetensors", b"m")


def test_raw_data_is_due_30_days_after_its_last_use_not_its_upload(
    job_store: JobStore, artifacts: ArtifactStore, alice: User
) -> None:
    now = utcnow()
    version = _version(job_store, artifacts, alice)
    _set_version(job_store, version.id, created_at=now - timedelta(days=100))
    job = _finished_job(job_store, alice, version, finished_at=now - timedelta(days=10))
    _set_job(job_store, job.id, created_at=now - timedelta(days=10))
    job_store.retention.set_user_policy(alice, {"raw_data_days": 30}, BOUNDS)

    assert plan_retention(job_store, now=now, bounds=BOUNDS) == []
    later = now + timedelta(days=21)
    [action] = plan_retention(job_store, now=later, bounds=BOUNDS)
    assert action.kind == "purge_raw_data" and action.target_id == version.id
    assert action.due_at == now + timedelta(days=20)
    assert (action.policy.level, action.policy.days) == ("user", 30)
    assert action.prefixes == (_folder(version),)
    assert action.label == "dataset chat v1"
    [schedule] = deletion_schedule(job_store, bounds=BOUNDS, dataset_version_id=version.id)
    assert schedule.at == now + timedelta(days=20)
    assert "30 days after its last use (your policy)" in schedule.describe()


def test_a_version_a_running_or_paused_job_uses_is_never_purged(
    job_store: JobStore, artifacts: ArtifactStore, alice: User
) -> None:
    now = utcnow()
    version = _version(job_store, artifacts, alice)
    job = job_store.jobs.enqueue(alice, name="long", config=CONFIG, train_dataset_version_id=version.id)
    _set_job(job_store, job.id, state="paused", created_at=now - timedelta(days=90))
    job_store.retention.set_user_policy(alice, {"raw_data_days": 5}, BOUNDS)
    assert plan_retention(job_store, now=now + timedelta(days=365), bounds=BOUNDS) == []


def test_the_dataset_policy_stricter_than_the_users_wins_and_the_users_when_it_is_stricter(
    job_store: JobStore, artifacts: ArtifactStore, alice: User
) -> None:
    now = utcnow()
    strict = _version(job_store, artifacts, alice, "strict")
    loose = _version(job_store, artifacts, alice, "loose")
    job_store.retention.set_user_policy(alice, {"raw_data_days": 30}, BOUNDS)
    job_store.retention.set_dataset_policy(alice, strict.dataset_id, {"raw_data_days": 7}, BOUNDS)
    job_store.retention.set_dataset_policy(alice, loose.dataset_id, {"raw_data_days": 90}, BOUNDS)

    actions = {a.target_id: a for a in plan_retention(job_store, now=now + timedelta(days=31), bounds=BOUNDS)}
    assert (actions[strict.id].policy.level, actions[strict.id].policy.days) == ("dataset", 7)
    assert (actions[loose.id].policy.level, actions[loose.id].policy.days) == ("user", 30)
    assert [a.target_id for a in plan_retention(job_store, now=now + timedelta(days=8), bounds=BOUNDS)] == [strict.id]
    # The operator's upper bound applies to what has no policy at all.
    bob = job_store.users.create_user("bob")
    kept = _version(job_store, artifacts, bob, "kept")
    assert plan_retention(job_store, now=now + timedelta(days=400), bounds=BOUNDS, owner_id=bob.id) == []
    bounded = RetentionBounds(max_days=60)
    [forced] = plan_retention(job_store, now=now + timedelta(days=61), bounds=bounded, owner_id=bob.id)
    assert (forced.target_id, forced.policy.level, forced.policy.days) == (kept.id, "operator", 60)


def test_pruning_keeps_the_best_and_the_newest_checkpoint_and_the_final_model(
    job_store: JobStore, artifacts: ArtifactStore, alice: User
) -> None:
    now = utcnow()
    job = _finished_job(job_store, alice, None, finished_at=now - timedelta(days=20))
    _checkpoints(job_store, artifacts, job, [100, 200, 300, 400], best=200)
    job_store.retention.set_user_policy(alice, {"checkpoint_days": 14}, BOUNDS)

    [action] = plan_retention(job_store, now=now, bounds=BOUNDS)
    assert action.kind == "prune_checkpoints" and action.checkpoint_steps == (100, 300)
    records = apply_retention(job_store, artifacts, [action], now=now)
    kept = [row.step for row in job_store.checkpoints.list_for_job(alice, job.id)]
    assert kept == [200, 400]
    assert not artifacts.list(checkpoint_prefix(alice.id, job.id, 100))
    assert artifacts.list(checkpoint_prefix(alice.id, job.id, 200))
    assert artifacts.exists(f"{job_prefix(alice.id, job.id)}/final/model.safetensors")
    assert {"where": "database", "what": f"checkpoint rows of job {job.name} (steps 100, 300)", "count": 2} in records
    assert plan_retention(job_store, now=now, bounds=BOUNDS) == []  # nothing more to prune
    (receipt,) = job_store.deletions.list_receipts(alice)  # the owner keeps what the prune removed
    assert (receipt.state, receipt.reason, receipt.target_id) == ("done", "retention", job.id)
    lines = [(line["where"], line["what"], line["count"], line["bytes"]) for line in receipt.removed]
    assert lines == [(record["where"], record["what"], record["count"], 0) for record in records]
    assert apply_retention(job_store, artifacts, [action], now=now) == []  # applying it again removes nothing


def test_job_days_deletes_finished_jobs_and_never_running_or_paused_ones(
    job_store: JobStore, artifacts: ArtifactStore, alice: User
) -> None:
    now = utcnow()
    old = now - timedelta(days=50)
    done = _finished_job(job_store, alice, None, finished_at=old, state="failed")
    artifacts.put_bytes(f"{job_prefix(alice.id, done.id)}/run/config.json", b"{}")
    active = []
    for state in ("running", "paused", "queued"):
        job = _finished_job(job_store, alice, None, finished_at=old)
        _set_job(job_store, job.id, state=state)
        active.append(job.id)
    job_store.retention.set_user_policy(alice, {"job_days": 30, "checkpoint_days": 1}, BOUNDS)

    actions = plan_retention(job_store, now=now, bounds=BOUNDS)
    assert [(a.kind, a.target_id) for a in actions] == [("delete_job", done.id)]
    apply_retention(job_store, artifacts, actions, now=now)
    with pytest.raises(NotFoundError):
        job_store.jobs.get(alice, done.id)
    # Its files and every other copy go with the deletion work item, whose receipt the owner keeps.
    (receipt,) = job_store.deletions.list_receipts(alice)
    assert (receipt.target_kind, receipt.target_id, receipt.reason) == ("job", done.id, "retention")
    item = job_store.work.get(alice, receipt.work_item_id)
    assert item.inputs["storage_prefixes"] == [job_prefix(alice.id, done.id)]
    assert item.inputs["job_ids"] == [done.id]
    assert sorted(job.id for job in job_store.jobs.list(alice).items) == sorted(active)


def test_the_plan_removes_nothing_and_the_sweep_removes_exactly_what_it_listed(
    job_store: JobStore, artifacts: ArtifactStore, alice: User
) -> None:
    now = utcnow()
    version = _version(job_store, artifacts, alice)
    fresh = _version(job_store, artifacts, alice, "fresh")
    _set_version(job_store, version.id, created_at=now - timedelta(days=40))
    job_store.retention.set_user_policy(alice, {"raw_data_days": 30}, BOUNDS)
    before = sorted(artifacts.list(""))

    plan = plan_retention(job_store, now=now, bounds=BOUNDS)
    assert sorted(artifacts.list("")) == before
    assert job_store.datasets.get_version(alice, version.id).purged_at is None
    assert [a.target_id for a in plan] == [version.id]

    records = apply_retention(job_store, artifacts, plan, now=now)
    removed = set(before) - set(artifacts.list(""))
    assert removed == {version.storage_key}
    assert {"where": "storage", "what": f"raw data of dataset chat v1 ({_folder(version)})",
            "count": 1} in records  # fmt: skip
    purged = job_store.datasets.get_version(alice, version.id)
    assert purged.purged_at == now and purged.sha256 == "0" * 64  # the row stays
    assert job_store.datasets.get_version(alice, fresh.id).purged_at is None
    assert plan_retention(job_store, now=now, bounds=BOUNDS) == []
    [done] = deletion_schedule(job_store, bounds=BOUNDS, dataset_version_id=version.id)
    assert done.done and done.describe() == f"Raw data was deleted on {now.date().isoformat()} by its retention policy."

    with pytest.raises(ConfigError) as refused:
        job_store.jobs.enqueue(alice, name="again", config=CONFIG, train_dataset_version_id=version.id)
    issue = refused.value.issues[0]
    assert issue.field == "train_dataset_version_id"
    assert f"the raw data of dataset chat v1 was deleted on {now.date().isoformat()} by its retention policy" in (
        issue.message
    )


def test_policies_out_of_bounds_are_refused_naming_the_field_and_one_user_wide_policy_is_kept(
    job_store: JobStore, artifacts: ArtifactStore, alice: User
) -> None:
    bounds = RetentionBounds(min_days=7, max_days=365)
    with pytest.raises(ConfigError) as refused:
        job_store.retention.set_user_policy(alice, {"raw_data_days": 3, "job_days": 400}, bounds)
    fields = {issue.field: issue.expected for issue in refused.value.issues}
    assert fields == {"raw_data_days": "at least 7", "job_days": "at most 365"}
    job_store.retention.set_user_policy(alice, {"raw_data_days": 30}, bounds)
    job_store.retention.set_user_policy(alice, {"job_days": 60}, bounds)
    policies = job_store.retention.policies(alice.id)
    assert list(policies) == [(alice.id, None)]
    assert (policies[(alice.id, None)].raw_data_days, policies[(alice.id, None)].job_days) == (30, 60)
    version = _version(job_store, artifacts, alice)
    bob = job_store.users.create_user("bob")
    with pytest.raises(NotFoundError):
        job_store.retention.set_dataset_policy(bob, version.dataset_id, {"raw_data_days": 9}, bounds)
    with pytest.raises(NotFoundError):
        job_store.retention.dataset_policy(bob, version.dataset_id)
