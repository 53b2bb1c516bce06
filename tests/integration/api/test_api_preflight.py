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


def test_model_processes_beyond_the_bound_answer_429_with_retry_after(api: AppHarness) -> None:
    model = api.base_model("alice")
    dataset = api.dataset("alice", name="busy")
    body = {"base_model_id": model["id"], "train_dataset_id": dataset["id"], "config": {"epochs": 1}}
    slots = api.client.app.state.tunedeck.engine_slots
    with slots.hold(api.users["alice"].id, "generation"):  # alice's one process is running
        busy = api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=body)
    assert busy.status_code == 429 and busy.headers["Retry-After"].isdigit()
    assert "per user" in busy.json()["detail"]
    with slots.hold("someone", "export"), slots.hold("someone-else", "export"):  # the server's total is taken
        full = api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=body)
    assert full.status_code == 429 and "at once" in full.json()["detail"]
    assert slots.running() == 0
