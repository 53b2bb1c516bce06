"""Deletions behave identically on SQLite and PostgreSQL: what a deletion reaches, its rows, its receipt."""

from __future__ import annotations

import pytest

from tests.fixtures.job_claims import claim_job
from tunedeck.core.errors import ForbiddenError, NotFoundError, StateTransitionError
from tunedeck.core.states import WorkState
from tunedeck.service.jobs.job_models import export_prefix
from tunedeck.service.privacy.deletion_plan import TrainedModelsError, plan_deletion, request_deletion
from tunedeck.storage.base import job_prefix, user_prefix
from tunedeck.store.kind_policy import ItemEnd
from tunedeck.store.models import DatasetVersion, Job, User
from tunedeck.store.store import JobStore
from tunedeck.store.work_items import dedup_key

CONFIG = {"epochs": 1, "batch_size": 2, "learning_rate": 1e-4}


@pytest.fixture
def alice(job_store: JobStore) -> User:
    return job_store.users.create_user("alice")


def _version(store: JobStore, owner: User, name: str, sha: str) -> DatasetVersion:
    dataset = store.datasets.create_dataset(owner, name)
    key = f"{user_prefix(owner.id)}/datasets/dsu_{name}/data.jsonl"
    return store.datasets.add_version(owner, dataset.id, sha256=sha, format="jsonl", rows=3, storage_key=key)


def _job(store: JobStore, owner: User, version: DatasetVersion, name: str = "run") -> Job:
    return store.jobs.enqueue(owner, name=name, config=CONFIG, train_dataset_version_id=version.id)


def test_a_job_deletion_removes_its_rows_with_a_pending_receipt_and_a_queued_item(
    job_store: JobStore, alice: User
) -> None:
    version = _version(job_store, alice, "chats", "a" * 64)
    job = _job(job_store, alice, version)
    plan = plan_deletion(job_store, alice, "job", job.id)
    assert plan.worker_inputs["storage_prefixes"] == [job_prefix(alice.id, job.id)]
    assert plan.worker_inputs["job_ids"] == [job.id] and plan.worker_inputs["dataset_sha256s"] == []

    receipt = request_deletion(job_store, alice, "job", job.id)
    with pytest.raises(NotFoundError):
        job_store.jobs.get(alice, job.id)
    assert job_store.datasets.get_version(alice, version.id).id == version.id  # the data stays
    assert receipt.state == "pending" and receipt.reason == "request" and receipt.target_label == "run"
    lines = {line["what"]: line["count"] for line in receipt.removed if line["where"] == "database"}
    assert lines["jobs"] == 1 and lines["work items"] == 1  # the job's place in the queue
    item = job_store.work.get(alice, str(receipt.work_item_id))
    assert item.kind == "delete" and item.state == WorkState.QUEUED
    assert item.inputs["receipt_id"] == receipt.id and item.inputs["job_ids"] == [job.id]
    with pytest.raises(StateTransitionError, match="cannot be cancelled"):
        job_store.queue.cancel(alice, item.id)


def test_a_running_job_is_never_deleted(job_store: JobStore, alice: User) -> None:
    job = _job(job_store, alice, _version(job_store, alice, "chats", "a" * 64))
    assert claim_job(job_store, "w1", devices=0, lease_s=60) is not None
    with pytest.raises(StateTransitionError, match="cancel"):
        request_deletion(job_store, alice, "job", job.id)
    assert job_store.jobs.get(alice, job.id).state == "running"
    assert job_store.deletions.list_receipts(alice) == []


def test_data_that_trained_jobs_is_refused_without_with_models_then_taken_with_them(
    job_store: JobStore, alice: User
) -> None:
    version = _version(job_store, alice, "chats", "a" * 64)
    job = _job(job_store, alice, version, name="trained")
    with pytest.raises(TrainedModelsError) as refused:
        request_deletion(job_store, alice, "dataset", version.dataset_id)
    assert refused.value.jobs == [(job.id, "trained")] and "with_models=true" in str(refused.value)
    assert job_store.datasets.get_dataset(alice, version.dataset_id).id == version.dataset_id  # nothing removed

    receipt = request_deletion(job_store, alice, "dataset", version.dataset_id, with_models=True)
    with pytest.raises(NotFoundError):
        job_store.jobs.get(alice, job.id)
    with pytest.raises(NotFoundError):
        job_store.datasets.get_dataset(alice, version.dataset_id)
    item = job_store.work.get(alice, str(receipt.work_item_id))
    assert item.inputs["dataset_sha256s"] == ["a" * 64] and item.inputs["job_ids"] == [job.id]
    assert job_prefix(alice.id, job.id) in item.inputs["storage_prefixes"]
    assert f"{user_prefix(alice.id)}/datasets/dsu_chats" in item.inputs["storage_prefixes"]
    tables = {line["what"] for line in receipt.removed}
    assert {"jobs", "datasets", "dataset versions"} <= tables


def test_an_export_deletion_frees_the_item_that_built_it(job_store: JobStore, alice: User) -> None:
    job = _job(job_store, alice, _version(job_store, alice, "chats", "a" * 64))
    prefix = export_prefix(alice.id, job.id, "adapter-final")
    built, _ = job_store.work.submit(alice, "export", {"job_id": job.id}, identity={"prefix": prefix}, job_id=job.id)
    claimed = job_store.queue.claim("w1", ["export"], devices=0, lease_s=60)
    exported = ItemEnd.succeeded({"name": "adapter-final"})
    assert claimed is not None and job_store.queue.finish(built.id, claimed.fencing_token, exported)
    receipt = request_deletion(job_store, alice, "export", f"{job.id}/adapter-final")
    assert receipt.target_id == f"{job.id}/adapter-final"
    assert job_store.work.get(alice, str(receipt.work_item_id)).inputs["storage_prefixes"] == [prefix]
    again, created = job_store.work.submit(alice, "export", {}, identity={"prefix": prefix}, job_id=job.id)
    assert created and again.dedup_key == dedup_key("export", {"prefix": prefix})


def test_a_user_deletion_is_an_admins_and_its_receipt_stays_with_the_admin(job_store: JobStore, alice: User) -> None:
    admin = job_store.users.create_user("root", admin=True)
    bob = job_store.users.create_user("bob")
    job = _job(job_store, alice, _version(job_store, alice, "chats", "c" * 64))
    request_deletion(job_store, alice, "job", job.id)  # alice's own receipt goes with her
    _job(job_store, alice, _version(job_store, alice, "notes", "d" * 64), name="second")
    job_store.users.issue_token(alice)
    with pytest.raises(ForbiddenError):
        request_deletion(job_store, bob, "user", alice.id)
    with pytest.raises(ForbiddenError):
        request_deletion(job_store, admin, "user", admin.id)

    receipt = request_deletion(job_store, admin, "user", alice.id)
    with pytest.raises(NotFoundError):
        job_store.users.get_user(alice.id)
    counts = {line["what"]: line["count"] for line in receipt.removed}
    assert counts["users"] == 1 and counts["jobs"] == 1 and counts["api tokens"] == 1
    assert counts["dataset versions"] == 2 and counts["deletion receipts"] == 1
    inputs = job_store.work.get(admin, str(receipt.work_item_id)).inputs
    assert inputs["storage_prefixes"] == [user_prefix(alice.id)]
    assert inputs["dataset_sha256s"] == ["c" * 64, "d" * 64]
    assert job_store.deletions.get(admin, receipt.id).owner_id == admin.id


def test_receipts_are_their_askers_merged_by_place_and_newest_first(job_store: JobStore, alice: User) -> None:
    bob = job_store.users.create_user("bob")
    admin = job_store.users.create_user("root", admin=True)
    first = request_deletion(job_store, alice, "dataset", _version(job_store, alice, "a", "a" * 64).dataset_id)
    second = request_deletion(job_store, alice, "dataset", _version(job_store, alice, "b", "b" * 64).dataset_id)
    assert [r.id for r in job_store.deletions.list_receipts(alice)] == [second.id, first.id]
    assert job_store.deletions.list_receipts(bob) == []
    for other in (bob, admin):
        with pytest.raises(NotFoundError):
            job_store.deletions.get(other, first.id)

    line = {"where": "storage", "what": "users/x/datasets/y", "count": 3, "bytes": 30}
    job_store.deletions.add_removed(first.id, [line])
    job_store.deletions.add_removed(first.id, [{**line, "count": 0, "bytes": 0}])  # found gone the second time
    done = job_store.deletions.finish(first.id)
    stored = [entry for entry in job_store.deletions.get(alice, first.id).removed if entry["where"] == "storage"]
    assert stored == [line] and done.state == "done" and done.finished_at is not None


def test_a_cache_hash_stays_in_use_while_any_users_version_has_it(job_store: JobStore, alice: User) -> None:
    bob = job_store.users.create_user("bob")
    mine = _version(job_store, alice, "mine", "e" * 64)
    _version(job_store, bob, "theirs", "e" * 64)
    request_deletion(job_store, alice, "dataset_version", mine.id)
    assert job_store.deletions.hashes_in_use(["e" * 64, "f" * 64]) == {"e" * 64}


def test_a_deleted_jobs_folder_finds_the_receipt_of_its_deletion_while_it_is_open(
    job_store: JobStore, alice: User
) -> None:
    version = _version(job_store, alice, "chats", "a" * 64)
    job, other = _job(job_store, alice, version), _job(job_store, alice, version, "other")
    receipt = request_deletion(job_store, alice, "job", job.id)
    assert job_store.deletions.open_receipt_for_job(job.id) == receipt.id
    assert job_store.deletions.open_receipt_for_job(other.id) is None  # not deleted
    item = job_store.queue.claim("w1", ("delete",), 0, 60)
    assert item is not None and item.item_id == receipt.work_item_id
    assert job_store.deletions.open_receipt_for_job(job.id) == receipt.id  # running: still open
    assert job_store.queue.finish(item.item_id, item.fencing_token, ItemEnd.succeeded({}))
    assert job_store.deletions.open_receipt_for_job(job.id) is None
