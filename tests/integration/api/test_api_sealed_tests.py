"""Sealed test sets through the API: sealing, refusal as training data or preview, the access log."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.app import API, AppHarness, jsonl_rows, uploaded_id
from tunedeck.core.errors import ConfigError


def _sealed(api: AppHarness, user: str = "alice") -> dict[str, Any]:
    """A dataset of `user` whose newest version is sealed."""
    response = api.upload(user, jsonl_rows(3, start=100), name="held-out")
    dataset = api.client.get(f"{API}/datasets/{uploaded_id(response)}", headers=api.auth(user)).json()
    sealed = api.client.post(f"{API}/datasets/{dataset['id']}/seal", headers=api.auth(user))
    assert sealed.status_code == 200, sealed.text
    assert sealed.json()["sealed"] is True and sealed.json()["id"] == dataset["latest"]["id"]
    return dataset


def _job_body(api: AppHarness, user: str, **overrides: Any) -> dict[str, Any]:
    train = api.dataset(user, name=f"train-{len(api.client.get(f'{API}/datasets', headers=api.auth(user)).json())}")
    return {"name": "run", "base_model_id": api.base_model(user)["id"], "train_dataset_id": train["id"], **overrides}


def test_a_sealed_version_is_refused_as_training_or_validation_data(api: AppHarness) -> None:
    sealed = _sealed(api)
    version_id = sealed["latest"]["id"]
    cases = {
        "train_dataset_id": {"train_dataset_id": sealed["id"]},
        "validation_dataset_id": {"validation_dataset_id": version_id},
    }
    for field, overrides in cases.items():
        body = _job_body(api, "alice", **overrides)
        response = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body)
        assert response.status_code == 422, response.text
        issue = response.json()["issues"][0]
        assert issue["field"] == field
        assert "sealed test set" in issue["message"] and "final evaluation" in issue["message"]
    # Named in the config instead of the body: still the validation set, still refused.
    body = _job_body(api, "alice", config={"validation_dataset_id": version_id})
    response = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body)
    assert response.status_code == 422 and response.json()["issues"][0]["field"] == "validation_dataset_id"
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"] == []
    # Preflight reads the rows a job would train on: refused the same way, before any engine runs.
    body = _job_body(api, "alice", train_dataset_id=version_id)
    del body["name"]
    preflight = api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=body)
    assert preflight.status_code == 422 and preflight.json()["issues"][0]["field"] == "train_dataset_id"


def test_the_job_store_refuses_a_sealed_version_below_every_front_end(api: AppHarness) -> None:
    sealed = _sealed(api)
    with pytest.raises(ConfigError) as raised:
        api.store.jobs.enqueue(
            api.users["alice"], name="direct", config={}, train_dataset_version_id=sealed["latest"]["id"]
        )
    assert [issue.field for issue in raised.value.issues] == ["train_dataset_version_id"]


def test_preview_and_inspection_of_a_sealed_version_are_refused(api: AppHarness) -> None:
    sealed = _sealed(api)
    preview = api.client.get(f"{API}/datasets/{sealed['id']}/preview", headers=api.auth("alice"))
    assert preview.status_code == 409 and "sealed test set" in preview.json()["detail"]
    assert "Question 100" not in preview.text  # no row leaks through the error
    model = api.base_model("alice")
    inspection = api.client.post(f"{API}/datasets/{sealed['id']}/inspection", headers=api.auth("alice"),
                                 json={"base_model_id": model["id"]})  # fmt: skip
    assert inspection.status_code == 409
    # The version listing still shows it, marked sealed.
    versions = api.client.get(f"{API}/datasets/{sealed['id']}/versions", headers=api.auth("alice")).json()
    assert [version["sealed"] for version in versions] == [True]


def test_access_log_lists_every_read_and_warns_from_the_second(api: AppHarness) -> None:
    sealed = _sealed(api)
    url = f"{API}/datasets/{sealed['id']}/test-accesses"
    empty = api.client.get(url, headers=api.auth("alice")).json()
    assert empty["sealed"] is True and empty["access_count"] == 0 and empty["warning"] is None
    first, second = api.job("alice", name="a"), api.job("alice", name="b")
    alice, version_id = api.users["alice"], sealed["latest"]["id"]
    # What `tunedeck eval test` records for each final evaluation.
    api.store.datasets.record_test_set_access(alice, version_id, job_id=first["id"], purpose="final evaluation")
    once = api.client.get(url, headers=api.auth("alice")).json()
    assert once["access_count"] == 1 and once["warning"] is None
    api.store.datasets.record_test_set_access(alice, version_id, job_id=second["id"], purpose="final evaluation")
    twice = api.client.get(url, headers=api.auth("alice"), params={"version": 1}).json()
    assert twice["access_count"] == 2 and twice["version_id"] == version_id
    assert [access["job_id"] for access in twice["accesses"]] == [first["id"], second["id"]]
    assert all(access["purpose"] == "final evaluation" and access["time"] for access in twice["accesses"])
    assert "evaluated 2 times" in twice["warning"]
    # Another user sees neither the log nor the seal action.
    assert api.client.get(url, headers=api.auth("bob")).status_code == 404
    assert api.client.post(f"{API}/datasets/{sealed['id']}/seal", headers=api.auth("bob")).status_code == 404
    # Nor does an admin: the log belongs to the dataset, and operators do not read users' datasets.
    assert api.client.get(url, headers=api.auth("root")).status_code == 404


def test_sealing_waits_for_unfinished_jobs_and_a_stopped_job_cannot_resume_on_it(api: AppHarness) -> None:
    job = api.job("alice", name="uses-it")
    version_id = job["train_dataset_version_id"]
    dataset_id = api.store.datasets.get_version(api.users["alice"], version_id).dataset_id
    seal = f"{API}/datasets/{dataset_id}/seal"
    refused = api.client.post(seal, headers=api.auth("alice"))
    assert refused.status_code == 409 and job["id"] in refused.json()["detail"]
    assert api.client.post(f"{API}/jobs/{job['id']}/cancel", headers=api.auth("alice")).status_code == 200
    assert api.client.post(seal, headers=api.auth("alice")).status_code == 200
    assert api.client.post(seal, headers=api.auth("alice")).json()["sealed"] is True  # sealing again: no change
    resumed = api.client.post(f"{API}/jobs/{job['id']}/resume", headers=api.auth("alice"))
    assert resumed.status_code == 422 and resumed.json()["issues"][0]["field"] == "train_dataset_version_id"
    clone = api.client.post(f"{API}/jobs/{job['id']}/clone", headers=api.auth("alice"), json={"config": {}})
    assert clone.status_code == 422 and clone.json()["issues"][0]["field"] == "train_dataset_version_id"
    assert api.client.get(f"{API}/jobs/{job['id']}", headers=api.auth("alice")).json()["state"] == "cancelled"
