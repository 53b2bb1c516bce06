"""Starting a job from another job's model through the API: which parents are accepted, and deleting a parent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fixtures.app import API, AppHarness
from tests.fixtures.job_claims import claim_job
from tunedeck.core.states import JobState
from tunedeck.storage.base import checkpoint_prefix, final_prefix
from tunedeck.store.train_policy import JobEnd


def _create(api: AppHarness, user: str, base_id: str, **config: Any) -> Any:
    dataset = api.dataset(user, name=f"d{len(api.client.get(f'{API}/datasets', headers=api.auth(user)).json())}")
    body = {"name": "run", "base_model_id": base_id, "train_dataset_id": dataset["id"], "config": config}
    return api.client.post(f"{API}/jobs", headers=api.auth(user), json=body)


def _parent(
    api: AppHarness,
    tmp_path: Path,
    *,
    succeed: bool,
    base_id: str | None = None,
    files: dict[str, bytes] | None = None,
    **config: Any,
) -> tuple[str, str]:
    """Alice's job with a committed checkpoint at step 2, succeeded (with a final model) or still running."""
    base_id = base_id or api.base_model("alice")["id"]
    created = _create(api, "alice", base_id, **config)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    claimed = claim_job(api.store, "test-worker", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == job_id
    folder = tmp_path / job_id
    folder.mkdir()
    for name, data in (files or {"adapter_model.safetensors": b"weights"}).items():
        (folder / name).write_bytes(data)
    token = claimed.fencing_token
    prefix = checkpoint_prefix(claimed.owner_id, job_id, 2)
    assert api.store.checkpoints.record_written(job_id, token, 2, prefix)
    manifest = api.artifacts.commit_directory(folder, prefix)
    assert api.store.checkpoints.mark_committed(job_id, token, 2, manifest.digest)
    if succeed:
        api.artifacts.commit_directory(folder, final_prefix(claimed.owner_id, job_id))
        assert api.store.queue.finish(claimed.item_id, token, JobEnd(JobState.SUCCEEDED))
    return job_id, base_id


def _issue(response: Any, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text
    issues = response.json()["issues"]
    assert len(issues) == 1, issues
    return dict(issues[0])


def test_a_job_starts_from_a_succeeded_job_of_its_owner_on_the_same_base(api: AppHarness, tmp_path: Path) -> None:
    parent_id, base_id = _parent(api, tmp_path, succeed=True)
    child = _create(api, "alice", base_id, init_from_job=parent_id)
    assert child.status_code == 201, child.text
    assert child.json()["config"]["init_from_job"] == parent_id
    from_step = _create(api, "alice", base_id, init_from_job=parent_id, init_from_checkpoint=2)
    assert from_step.status_code == 201, from_step.text


def test_another_users_job_reads_as_no_such_job(api: AppHarness, tmp_path: Path) -> None:
    parent_id, _ = _parent(api, tmp_path, succeed=True)
    bob_base = api.base_model("bob")["id"]
    # 404, as for any id the caller cannot see: the same answer for another user's job and an unknown one.
    theirs = _issue(_create(api, "bob", bob_base, init_from_job=parent_id), status=404)
    unknown = _issue(_create(api, "bob", bob_base, init_from_job="job_unknown"), status=404)
    assert theirs["field"] == unknown["field"] == "config.init_from_job"
    assert theirs["message"] == f"no such job: {parent_id!r}"
    assert theirs["message"].replace(parent_id, "X") == unknown["message"].replace("job_unknown", "X")
    assert "alice" not in str(theirs) and "state" not in theirs["message"]


def test_a_job_without_a_final_model_needs_a_committed_checkpoint(api: AppHarness, tmp_path: Path) -> None:
    parent_id, base_id = _parent(api, tmp_path, succeed=False)
    issue = _issue(_create(api, "alice", base_id, init_from_job=parent_id))
    assert issue["field"] == "config.init_from_job"
    assert "has no final model (state running)" in issue["message"] and "init_from_checkpoint" in issue["message"]
    assert _create(api, "alice", base_id, init_from_job=parent_id, init_from_checkpoint=2).status_code == 201


def test_an_unknown_checkpoint_names_the_committed_ones(api: AppHarness, tmp_path: Path) -> None:
    parent_id, base_id = _parent(api, tmp_path, succeed=True)
    issue = _issue(_create(api, "alice", base_id, init_from_job=parent_id, init_from_checkpoint=7))
    assert issue["field"] == "config.init_from_checkpoint"
    assert issue["expected"] == "one of [2]" and issue["found"] == "7"


def test_another_base_model_is_refused_with_the_reason(api: AppHarness, tmp_path: Path) -> None:
    parent_id, base_id = _parent(api, tmp_path, succeed=True)
    other_base = api.base_model("alice")["id"]
    issue = _issue(_create(api, "alice", other_base, init_from_job=parent_id))
    assert issue["field"] == "config.init_from_job"
    assert "trained on another base model" in issue["message"]
    assert issue["expected"] == f"base_model_id {base_id}" and issue["found"] == other_base


def test_deleting_a_job_others_started_from_needs_with_models(api: AppHarness, tmp_path: Path) -> None:
    parent_id, base_id = _parent(api, tmp_path, succeed=True)
    child = _create(api, "alice", base_id, init_from_job=parent_id).json()["id"]
    api.client.post(f"{API}/jobs/{child}/cancel", headers=api.auth("alice"))
    # A cancelled job has no final model to start from: the grandchild is put in the store as a chain would be.
    alice = api.users["alice"]
    grandchild = api.store.jobs.enqueue(
        alice,
        name="grandchild",
        config={"init_from_job": child},
        base_model_id=base_id,
        train_dataset_version_id=api.store.jobs.get(alice, child).train_dataset_version_id,
    )
    api.client.post(f"{API}/jobs/{grandchild.id}/cancel", headers=api.auth("alice"))

    refused = api.client.delete(f"{API}/jobs/{parent_id}", headers=api.auth("alice"))
    assert refused.status_code == 409, refused.text
    listed = [issue["found"] for issue in refused.json()["issues"]]
    assert listed == sorted([child, grandchild.id])
    assert all("started from this job's model" in issue["message"] for issue in refused.json()["issues"])
    assert api.client.get(f"{API}/jobs/{parent_id}", headers=api.auth("alice")).status_code == 200

    deleted = api.client.delete(f"{API}/jobs/{parent_id}", headers=api.auth("alice"), params={"with_models": True})
    assert deleted.status_code == 202, deleted.text
    for job_id in (parent_id, child, grandchild.id):
        assert api.client.get(f"{API}/jobs/{job_id}", headers=api.auth("alice")).status_code == 404


def test_an_adapter_trained_on_another_jobs_full_weights_cannot_be_continued(api: AppHarness, tmp_path: Path) -> None:
    full = {"model.safetensors": b"weights", "config.json": b"{}"}
    grandparent, base_id = _parent(api, tmp_path, succeed=True, files=full)
    on_weights = {
        "adapter_model.safetensors": b"adapter",
        "adapter_config.json": b"{}",
        "tunedeck_config.json": json.dumps({"init_from": {"how": "weights"}}).encode(),
    }
    parent, _ = _parent(api, tmp_path, succeed=True, base_id=base_id, files=on_weights, init_from_job=grandparent)
    issue = _issue(_create(api, "alice", base_id, init_from_job=parent))
    assert issue["field"] == "config.init_from_job" and "on top of another job's full weights" in issue["message"]
