"""Retention over the API: policies within the server's bounds, another user's dataset, the plan, purged data."""

from __future__ import annotations

from datetime import timedelta

from tests.fixtures.app import API, AppHarness
from tunedeck.service.privacy.retention_plan import plan_retention
from tunedeck.service.privacy.retention_sweep import apply_retention
from tunedeck.store.retention import RetentionBounds
from tunedeck.store.types import utcnow


def test_a_policy_outside_the_servers_bounds_is_a_422_naming_the_field_and_the_bound(api: AppHarness) -> None:
    api.settings.retention_min_days = 7
    api.settings.retention_max_days = 365
    alice = api.auth("alice")
    assert api.client.get(f"{API}/retention", headers=alice).json()["bounds"] == {"min_days": 7, "max_days": 365}

    refused = api.client.put(f"{API}/retention", headers=alice, json={"raw_data_days": 3, "job_days": 400})
    assert refused.status_code == 422, refused.text
    issues = {issue["field"]: issue for issue in refused.json()["issues"]}
    assert issues["raw_data_days"]["expected"] == "at least 7"
    assert issues["job_days"]["expected"] == "at most 365"
    assert "365 days" in issues["job_days"]["message"]

    saved = api.client.put(f"{API}/retention", headers=alice, json={"raw_data_days": 30})
    assert saved.status_code == 200 and saved.json()["raw_data_days"] == 30
    again = api.client.put(f"{API}/retention", headers=alice, json={"job_days": 90}).json()
    assert (again["raw_data_days"], again["job_days"]) == (30, 90)  # fields not sent are kept


def test_another_users_dataset_retention_is_404_and_the_plan_of_everyone_is_for_admins(api: AppHarness) -> None:
    dataset = api.dataset("alice")
    path = f"{API}/datasets/{dataset['id']}/retention"
    assert api.client.get(path, headers=api.auth("bob")).status_code == 404
    assert api.client.put(path, headers=api.auth("bob"), json={"raw_data_days": 5}).status_code == 404
    assert (
        api.client.put(path, headers=api.auth("alice"), json={"raw_data_days": 5}).json()["dataset_id"] == dataset["id"]
    )
    assert api.client.get(f"{API}/retention/plan", headers=api.auth("bob"), params={"all": "true"}).status_code == 403
    assert api.client.get(f"{API}/retention/plan", headers=api.auth("root"), params={"all": "true"}).status_code == 200


def test_the_plan_is_a_dry_run_and_a_purged_version_is_refused_with_its_deletion_date(api: AppHarness) -> None:
    dataset = api.dataset("alice", name="notes")
    alice = api.auth("alice")
    api.client.put(f"{API}/datasets/{dataset['id']}/retention", headers=alice, json={"raw_data_days": 2})
    shown = api.client.get(f"{API}/datasets/{dataset['id']}", headers=alice).json()["latest"]
    assert shown["raw_data_deleted_after"] is not None and shown["purged_at"] is None

    later = utcnow() + timedelta(days=3)
    assert api.client.get(f"{API}/retention/plan", headers=alice).json()["actions"] == []  # not due yet
    planned = api.client.get(f"{API}/retention/plan", headers=alice, params={"within_days": 3})
    [action] = planned.json()["actions"]
    assert action["kind"] == "purge_raw_data" and action["policy"] == {"level": "dataset", "days": 2}
    assert (
        api.client.get(f"{API}/retention/plan", headers=api.auth("bob"), params={"within_days": 3}).json()["actions"]
        == []
    )
    assert api.client.get(f"{API}/datasets/{dataset['id']}/preview", headers=alice).status_code == 200  # dry run

    actions = plan_retention(api.store, now=later, bounds=RetentionBounds())
    apply_retention(api.store, api.artifacts, actions, now=later)
    expected = f"the raw data of dataset notes v1 was deleted on {later.date().isoformat()} by its retention policy"
    preview = api.client.get(f"{API}/datasets/{dataset['id']}/preview", headers=alice)
    assert preview.status_code == 410 and expected in preview.json()["detail"]
    model = api.base_model("alice")
    body = {"name": "late", "base_model_id": model["id"], "train_dataset_id": dataset["id"], "config": {"epochs": 1}}
    refused = api.client.post(f"{API}/jobs", headers=alice, json=body)
    assert refused.status_code == 422, refused.text
    [issue] = refused.json()["issues"]
    assert issue["field"] == "train_dataset_id" and expected in issue["message"]


def test_a_job_says_when_its_checkpoints_and_itself_are_deleted(api: AppHarness) -> None:
    job = api.job("alice")
    alice = api.auth("alice")
    api.client.put(f"{API}/retention", headers=alice, json={"job_days": 30})
    queued = api.client.get(f"{API}/jobs/{job['id']}", headers=alice).json()
    assert queued["deleted_after"] is None  # not finished: no date yet
    api.client.post(f"{API}/jobs/{job['id']}/cancel", headers=alice)
    cancelled = api.client.get(f"{API}/jobs/{job['id']}", headers=alice).json()
    assert cancelled["finished_at"] is not None
    assert cancelled["deleted_after"] is not None and cancelled["checkpoints_pruned_after"] is None
