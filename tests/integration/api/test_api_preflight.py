"""The job form's "Run preflight": the eight checks on a job's inputs, run by a worker, no job queued."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.app import API, AppHarness, running_worker

FAST = {"epochs": 1, "batch_size": 2, "gradient_accumulation_steps": 1, "max_length": 64, "mixed_precision": "auto"}


def test_preflight_reports_eight_checks_and_queues_nothing(api: AppHarness, tiny_llama_dir: Path) -> None:
    dataset = api.dataset("alice", rows=8, name="qa")
    model = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json={"local_path": str(tiny_llama_dir)})
    assert model.status_code == 201, model.text
    body = {"base_model_id": model.json()["id"], "train_dataset_id": dataset["id"], "config": FAST}

    with running_worker(api):
        answer = api.client.post(f"{API}/preflight?wait=120", headers=api.auth("alice"), json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["kind"] == "preflight" and answer.json()["state"] == "succeeded"
    result = answer.json()["result"]
    report = result["report"]
    assert [check["number"] for check in report["checks"]] == list(range(1, 9))
    assert {check["status"] for check in report["checks"]} <= {"pass", "warn"}
    assert result["ok"] is True
    full_step = next(c for c in report["checks"] if c["name"] == "full_step")
    assert full_step["figures"]  # measured, not estimated
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"] == []

    refused = api.client.post(
        f"{API}/preflight", headers=api.auth("alice"), json={**body, "config": {"batch_sise": 2}}
    )
    assert refused.status_code == 422 and "batch_size" in refused.text
    assert api.client.post(f"{API}/preflight", headers=api.auth("bob"), json=body).status_code == 404


def test_model_work_beyond_the_users_bound_answers_429_with_retry_after(api: AppHarness) -> None:
    model = api.base_model("alice")
    dataset = api.dataset("alice", name="busy")
    body = {"base_model_id": model["id"], "train_dataset_id": dataset["id"], "config": {"epochs": 1}}
    bound = api.settings.max_pending_work_per_user
    queued = [api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=body) for _ in range(bound)]
    assert [answer.status_code for answer in queued] == [202] * bound  # no worker runs them here
    busy = api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=body)
    assert busy.status_code == 429 and busy.headers["Retry-After"].isdigit()
    assert f"TUNEDECK_MAX_PENDING_WORK_PER_USER={bound}" in busy.json()["detail"]
    # Another user's work is not held back by alice's, and a cancelled item frees a place.
    bobs = api.dataset("bob", name="b")
    bob_model = api.base_model("bob")
    other = {"base_model_id": bob_model["id"], "train_dataset_id": bobs["id"], "config": {"epochs": 1}}
    assert api.client.post(f"{API}/preflight", headers=api.auth("bob"), json=other).status_code == 202
    cancelled = api.client.post(f"{queued[0].json()['url']}/cancel", headers=api.auth("alice"))
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=body).status_code == 202
