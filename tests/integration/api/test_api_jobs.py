"""Jobs through the API: config validation by field, references, pagination, lifecycle actions."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.app import API, AppHarness, uploaded_id
from tunedeck.store.train_policy import JobEnd


def _create(api: AppHarness, user: str, **overrides: object) -> object:
    dataset = api.dataset(user, name=f"d{len(api.client.get(f'{API}/datasets', headers=api.auth(user)).json())}")
    model = api.base_model(user)
    body = {"name": "run", "base_model_id": model["id"], "train_dataset_id": dataset["id"], **overrides}
    return api.client.post(f"{API}/jobs", headers=api.auth(user), json=body)


def test_bad_config_key_is_422_naming_the_field(api: AppHarness) -> None:
    response = _create(api, "alice", config={"learnin_rate": 1e-4})
    assert response.status_code == 422, response.text
    issue = response.json()["issues"][0]
    assert issue["field"] == "config.learnin_rate"
    assert "learning_rate" in issue["message"]  # the closest valid key is suggested
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"] == []


def test_out_of_range_and_contradictory_values_name_their_fields(api: AppHarness) -> None:
    out_of_range = _create(api, "alice", config={"lora_r": 0})
    assert out_of_range.status_code == 422
    assert [issue["field"] for issue in out_of_range.json()["issues"]] == ["config.lora_r"]
    contradiction = _create(api, "alice", config={"save_strategy": "no", "save_steps": 10})
    assert contradiction.status_code == 422
    assert [issue["field"] for issue in contradiction.json()["issues"]] == ["config.save_steps"]


def test_unknown_body_key_and_unknown_references(api: AppHarness) -> None:
    assert _create(api, "alice", colour="red").status_code == 422
    assert _create(api, "alice", base_model_id="bm_nope").status_code == 404
    assert _create(api, "alice", train_dataset_id="ds_nope").status_code == 404
    assert _create(api, "alice", validation_dataset_id="dsv_nope").status_code == 404


def test_job_records_dataset_versions_and_the_resolved_config(api: AppHarness) -> None:
    validation = api.dataset("alice", name="val")
    response = _create(api, "alice", validation_dataset_id=validation["id"], config={"epochs": 2})
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["state"] == "queued"
    assert job["train_dataset_version_id"].startswith("dsv_")
    assert job["validation_dataset_version_id"] == validation["latest"]["id"]
    assert job["config"]["epochs"] == 2 and job["config"]["learning_rate"] == 5e-5
    assert job["config"]["validation_dataset_id"] == validation["latest"]["id"]


def test_the_body_and_the_config_name_one_validation_dataset(api: AppHarness) -> None:
    named = api.dataset("alice", name="val-a")
    other = api.dataset("alice", name="val-b")
    response = _create(api, "alice", validation_dataset_id=named["id"], config={"validation_dataset_id": other["id"]})
    assert response.status_code == 422, response.text
    assert response.json()["issues"][0]["field"] == "config.validation_dataset_id"


def test_cursor_pagination_and_filters(api: AppHarness) -> None:
    created = [api.job("alice", name=f"sweep-{i}")["id"] for i in range(5)]
    api.job("alice", name="other")
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 2, "name": "SWEEP"} | ({"cursor": cursor} if cursor else {})
        response = api.client.get(f"{API}/jobs", headers=api.auth("alice"), params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        seen += [job["id"] for job in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == list(reversed(created))  # newest first, no duplicates, none missing
    api.client.post(f"{API}/jobs/{created[0]}/cancel", headers=api.auth("alice"))
    cancelled = api.client.get(f"{API}/jobs", headers=api.auth("alice"), params={"state": "cancelled"}).json()
    assert [job["id"] for job in cancelled["items"]] == [created[0]]
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice"), params={"state": "bogus"}).status_code == 422


def test_cancel_pause_resume_clone_delete(api: AppHarness, tmp_path: Path) -> None:
    job = api.job("alice", name="life")
    url = f"{API}/jobs/{job['id']}"
    # Pausing a queued job is not an edge of the state machine.
    assert api.client.post(f"{url}/pause", headers=api.auth("alice")).status_code == 409
    api.commit_checkpoint(job["id"], 10, tmp_path, {"model.safetensors": b"w"})
    paused = api.client.post(f"{url}/pause", headers=api.auth("alice"))
    assert paused.status_code == 200 and paused.json()["state"] == "pausing"
    assert api.client.delete(url, headers=api.auth("alice")).status_code == 409  # still held by a worker
    cancel = api.client.post(f"{url}/cancel", headers=api.auth("alice")).json()
    assert cancel["requested_action"] == "cancel"

    other = api.job("alice", name="queued")
    other_url = f"{API}/jobs/{other['id']}"
    assert api.client.post(f"{other_url}/cancel", headers=api.auth("alice")).json()["state"] == "cancelled"
    resumed = api.client.post(f"{other_url}/resume", headers=api.auth("alice"))
    assert resumed.status_code == 200 and resumed.json()["state"] == "queued"

    bad_clone = api.client.post(f"{other_url}/clone", headers=api.auth("alice"), json={"config": {"epoch": 3}})
    assert bad_clone.status_code == 422 and bad_clone.json()["issues"][0]["field"] == "config.epoch"
    clone = api.client.post(
        f"{other_url}/clone", headers=api.auth("alice"), json={"name": "again", "config": {"learning_rate": 1e-4}}
    )
    assert clone.status_code == 201, clone.text
    assert clone.json()["cloned_from"] == other["id"]
    assert clone.json()["config"]["learning_rate"] == 1e-4 and clone.json()["config"]["epochs"] == 1

    api.client.post(f"{other_url}/cancel", headers=api.auth("alice"))
    assert api.client.delete(other_url, headers=api.auth("alice")).status_code == 202
    assert api.client.get(other_url, headers=api.auth("alice")).status_code == 404


def test_delete_removes_the_jobs_artifacts(api: AppHarness, tmp_path: Path) -> None:
    job = api.job("alice", name="artifacts")
    claimed = api.commit_checkpoint(job["id"], 5, tmp_path, {"a.bin": b"1"})
    api.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd("succeeded"))
    assert any("/checkpoints/" in key for key in api.artifacts.list(""))
    assert api.client.delete(f"{API}/jobs/{job['id']}", headers=api.auth("alice")).status_code == 202
    assert api.run_work(("delete",)) == 1
    assert not any("/jobs/" in key for key in api.artifacts.list(""))


def test_only_an_admin_queues_a_job_above_the_default_priority(api: AppHarness) -> None:
    job = api.job("alice", name="normal")
    dataset = api.dataset("alice", name="prio-data")
    body = {"name": "ahead", "base_model_id": job["base_model_id"], "train_dataset_id": dataset["id"],
            "config": {"epochs": 1}, "priority": 100}  # fmt: skip
    refused = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body)
    assert refused.status_code == 403 and "only an admin" in refused.json()["detail"]
    lower = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json={**body, "priority": -5})
    assert lower.status_code == 201  # stepping back is anyone's choice
    clone = api.client.post(f"{API}/jobs/{job['id']}/clone", headers=api.auth("alice"), json={"priority": 1})
    assert clone.status_code == 403
    admins_job = api.job("root", name="urgent")
    by_admin = api.client.post(f"{API}/jobs/{admins_job['id']}/clone", headers=api.auth("root"), json={"priority": 100})
    assert by_admin.status_code == 201 and by_admin.json()["priority"] == 100
    # An admin does not read users' data: a clone of alice's job, on her dataset, is not theirs to make.
    on_her_data = api.client.post(f"{API}/jobs/{job['id']}/clone", headers=api.auth("root"), json={"priority": 100})
    assert on_her_data.status_code == 404


def test_a_jobs_place_in_the_queue_is_a_train_work_item(api: AppHarness) -> None:
    job = api.job("alice", name="in-line")
    listed = api.client.get(f"{API}/work", params={"job_id": job["id"]}, headers=api.auth("alice"))
    assert listed.status_code == 200
    (item,) = listed.json()
    assert (item["kind"], item["state"], item["job_id"]) == ("train", "queued", job["id"])
    # The job decides what happens to its training: cancelling the item says where to go instead.
    refused = api.client.post(f"{API}/work/{item['id']}/cancel", headers=api.auth("alice"))
    assert refused.status_code == 409 and f"/jobs/{job['id']}/cancel" in refused.json()["detail"]
    assert api.client.get(f"{API}/work/{item['id']}", headers=api.auth("bob")).status_code == 404
    only_exports = api.client.get(f"{API}/work", params={"kind": "export"}, headers=api.auth("alice"))
    assert only_exports.status_code == 200 and only_exports.json() == []
    unknown = api.client.get(f"{API}/work", params={"kind": "bake"}, headers=api.auth("alice"))
    assert unknown.status_code == 422
    api.client.post(f"{API}/jobs/{job['id']}/cancel", headers=api.auth("alice"))
    ended = api.client.get(f"{API}/work/{item['id']}", headers=api.auth("alice")).json()
    assert ended["state"] == "cancelled" and ended["error"]["detail"] == "cancelled by its owner"


def test_a_dataset_whose_rows_cannot_train_the_task_is_422_naming_it(api: AppHarness) -> None:
    # Prompt/completion rows train sft, not a preference task: the dataset's field is named, with the kind found.
    refused = _create(api, "alice", config={"task": "dpo"})
    assert refused.status_code == 422, refused.text
    (issue,) = refused.json()["issues"]
    assert issue["field"] == "train_dataset_id" and issue["found"] == "prompt_completion"
    assert "cannot train task dpo" in issue["message"] and "train task sft" in issue["message"]
    assert issue["expected"] == "preference"
    # The validation data is held to the same rule as the training data.
    labelled = b"".join(
        json.dumps({"text": f"message {i}", "label": "spam" if i % 2 else "ham"}).encode() + b"\n" for i in range(4)
    )
    uploaded = api.upload("alice", labelled, name="labelled")
    assert uploaded.status_code == 200, uploaded.text
    labelled_id = uploaded_id(uploaded)
    mixed = _create(api, "alice", validation_dataset_id=labelled_id)
    assert mixed.status_code == 422, mixed.text
    assert [i["field"] for i in mixed.json()["issues"]] == ["validation_dataset_id"]
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"] == []


def test_a_clone_that_changes_the_task_keeps_data_that_fits_it(api: AppHarness) -> None:
    job = api.job("alice", name="sft-first")
    url = f"{API}/jobs/{job['id']}/clone"
    refused = api.client.post(url, headers=api.auth("alice"), json={"config": {"task": "kto"}})
    assert refused.status_code == 422, refused.text
    assert [i["field"] for i in refused.json()["issues"]] == ["train_dataset_version_id"]
    bad_task = api.client.post(url, headers=api.auth("alice"), json={"config": {"task": "rlhf"}})
    assert bad_task.status_code == 422 and bad_task.json()["issues"][0]["field"] == "config.task"
