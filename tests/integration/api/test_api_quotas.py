"""Quotas through the API: admins set them, users read theirs, jobs and uploads past a limit are refused."""

from __future__ import annotations

from tests.fixtures.app import API, AppHarness, jsonl_rows
from tests.fixtures.job_claims import claim_job


def test_members_read_their_quota_and_only_admins_set_quotas(api: AppHarness) -> None:
    mine = api.client.get(f"{API}/me/quota", headers=api.auth("alice"))
    assert mine.status_code == 200, mine.text
    body = mine.json()
    assert body["user"] == "alice" and body["limits"]["queued_jobs"] is None and body["limits"]["period_days"] == 30
    assert body["use"] == {"running_jobs": 0, "queued_jobs": 0, "storage_bytes": 0, "device_hours": 0.0}
    for method, path in (
        ("PATCH", f"{API}/users/bob/quota"),
        ("GET", f"{API}/users/bob/quota"),
        ("PATCH", f"{API}/quotas/everyone"),
        ("GET", f"{API}/quotas/everyone"),
    ):
        answer = api.client.request(method, path, headers=api.auth("alice"), json={"queued_jobs": 100})
        assert answer.status_code == 403, (method, path, answer.text)
    everyone = api.client.patch(f"{API}/quotas/everyone", headers=api.auth("root"), json={"queued_jobs": 1})
    assert everyone.status_code == 200 and everyone.json()["queued_jobs"] == 1
    assert everyone.json()["updated_by"] == api.users["root"].id
    bob = api.client.patch(f"{API}/users/bob/quota", headers=api.auth("root"), json={"queued_jobs": 5})
    assert bob.status_code == 200, bob.text
    assert bob.json()["limits"]["queued_jobs"] == 5 and bob.json()["own"]["queued_jobs"] == 5
    assert api.client.get(f"{API}/me/quota", headers=api.auth("alice")).json()["limits"]["queued_jobs"] == 1
    cleared = api.client.patch(f"{API}/users/bob/quota", headers=api.auth("root"), json={"queued_jobs": None})
    assert cleared.json()["limits"]["queued_jobs"] == 1
    missing = api.client.get(f"{API}/users/nobody/quota", headers=api.auth("root"))
    assert missing.status_code == 404
    for bad in ({"queued_jobs": -1}, {"period_days": 0}, {"storage_bytes": 2**63}, {"unknown": 1}):
        answer = api.client.patch(f"{API}/quotas/everyone", headers=api.auth("root"), json=bad)
        assert answer.status_code == 422, (bad, answer.text)


def test_a_job_past_the_queued_limit_is_refused_with_the_limit_and_its_use(api: AppHarness) -> None:
    api.client.patch(f"{API}/users/alice/quota", headers=api.auth("root"), json={"queued_jobs": 1})
    first = api.job("alice", name="first")
    refused = api.client.post(
        f"{API}/jobs",
        headers=api.auth("alice"),
        json={
            "name": "second",
            "base_model_id": first["base_model_id"],
            "train_dataset_id": first["train_dataset_version_id"],
            "config": {"epochs": 1},
        },
    )
    assert refused.status_code == 403, refused.text
    detail = refused.json()["detail"]
    assert "queued jobs (1 of 1 waiting)" in detail and "tunedeck users quota alice --queued-jobs" in detail
    clone = api.client.post(f"{API}/jobs/{first['id']}/clone", headers=api.auth("alice"), json={"config": {}})
    assert clone.status_code == 403
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"][0]["id"] == first["id"]
    assert len(api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"]) == 1
    api.job("bob", name="bob-is-not-limited")


def test_a_queued_job_says_which_limit_it_waits_on(api: AppHarness) -> None:
    api.client.patch(f"{API}/users/alice/quota", headers=api.auth("root"), json={"running_jobs": 1})
    running = api.job("alice", name="running")
    waiting = api.job("alice", name="waiting")
    claimed = claim_job(api.store, "w", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == running["id"]
    assert claim_job(api.store, "w", devices=0, lease_s=60) is None
    seen = api.client.get(f"{API}/jobs/{waiting['id']}", headers=api.auth("alice")).json()
    assert seen["state"] == "queued" and seen["waiting_for"] == "running jobs: 1 of 1 in use"
    assert api.client.get(f"{API}/jobs/{running['id']}", headers=api.auth("alice")).json()["waiting_for"] is None


def test_storage_limit_refuses_an_upload_that_would_pass_it_and_keeps_nothing(api: AppHarness) -> None:
    small = api.dataset("alice", rows=2, name="small")
    use = api.client.get(f"{API}/me/quota", headers=api.auth("alice")).json()["use"]["storage_bytes"]
    assert use > small["latest"]["size_bytes"]  # the stored file, its preview and manifests
    limit = use + 100
    api.client.patch(f"{API}/users/alice/quota", headers=api.auth("root"), json={"storage_bytes": limit})
    refused = api.upload("alice", jsonl_rows(40), name="big")
    assert refused.status_code == 403, refused.text
    assert f"stored bytes ({use} of {limit} in use" in refused.json()["detail"]
    assert [d["name"] for d in api.client.get(f"{API}/datasets", headers=api.auth("alice")).json()] == ["small"]
    assert api.client.get(f"{API}/me/quota", headers=api.auth("alice")).json()["use"]["storage_bytes"] == use
    assert api.upload("bob", jsonl_rows(40), name="big").status_code == 200


def test_admins_manage_accounts_but_do_not_read_users_datasets(api: AppHarness) -> None:
    dataset = api.dataset("alice", name="private")
    job = api.job("alice", name="job")
    root = api.auth("root")
    assert api.client.get(f"{API}/datasets", headers=root).json() == []
    for path in (
        f"{API}/datasets/{dataset['id']}",
        f"{API}/datasets/{dataset['id']}/versions",
        f"{API}/datasets/{dataset['id']}/preview",
    ):
        assert api.client.get(path, headers=root).status_code == 404, path
    assert api.client.delete(f"{API}/datasets/{dataset['id']}", headers=root).status_code == 404
    # The queue is the operator's to run: they see the job and can cancel it.
    assert api.client.get(f"{API}/jobs/{job['id']}", headers=root).status_code == 200
    assert api.client.post(f"{API}/jobs/{job['id']}/cancel", headers=root).json()["state"] == "cancelled"
