"""The job form's "Run preflight": the eight checks on a job's inputs through the API, nothing queued."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.app import API, AppHarness

FAST = {"epochs": 1, "batch_size": 2, "gradient_accumulation_steps": 1, "max_length": 64, "mixed_precision": "auto"}


def test_preflight_reports_eight_checks_and_queues_nothing(api: AppHarness, tiny_llama_dir: Path) -> None:
    dataset = api.dataset("alice", rows=8, name="qa")
    model = api.client.post(f"{API}/base-models", headers=api.auth("alice"), json={"local_path": str(tiny_llama_dir)})
    assert model.status_code == 201, model.text
    body = {"base_model_id": model.json()["id"], "train_dataset_id": dataset["id"], "config": FAST}

    answer = api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=body)
    assert answer.status_code == 200, answer.text
    report = answer.json()["report"]
    assert [check["number"] for check in report["checks"]] == list(range(1, 9))
    assert {check["status"] for check in report["checks"]} <= {"pass", "warn"}
    assert answer.json()["ok"] is True
    full_step = next(c for c in report["checks"] if c["name"] == "full_step")
    assert full_step["figures"]  # measured, not estimated
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"] == []

    refused = api.client.post(
        f"{API}/preflight", headers=api.auth("alice"), json={**body, "config": {"batch_sise": 2}}
    )
    assert refused.status_code == 422 and "batch_size" in refused.text
    assert api.client.post(f"{API}/preflight", headers=api.auth("bob"), json=body).status_code == 404
