"""The job form's "Run preflight": the checks on a job's inputs, run by a worker, no job queued."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.app import API, AppHarness, running_worker
from tunedeck.core.states import WorkState
from tunedeck.worker.supervisor import Worker, build_context

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
    # The worker passed on each check's start, then the end: what the job form's bar shows.
    assert answer.json()["progress"] == {"phase": "checking", "done": 10, "total": 10, "check": "done"}
    result = answer.json()["result"]
    report = result["report"]
    assert [check["number"] for check in report["checks"]] == [*range(1, 9), 10, 11]
    applying = [check for check in report["checks"] if not check["message"].startswith("not applicable")]
    assert {check["status"] for check in applying} <= {"pass", "warn"}
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


def test_a_preflight_reserves_the_devices_its_job_would_and_waits_for_a_worker_that_has_them(
    api: AppHarness,
) -> None:
    model = api.base_model("alice")
    dataset = api.dataset("alice", name="gpu-data")
    # What the job form sends for a job, and (less its name) for that job's preflight.
    inputs = {"base_model_id": model["id"], "train_dataset_id": dataset["id"], "config": FAST, "devices_needed": 2}
    job = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json={"name": "on-two-gpus", **inputs})
    assert job.status_code == 201, job.text
    queued = api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=inputs)
    assert queued.status_code == 202, queued.text
    item = api.store.work.get(api.users["alice"], queued.json()["id"])
    stored_job = api.store.jobs.get(api.users["alice"], job.json()["id"])
    assert item.devices_needed == stored_job.devices_needed == job.json()["devices_needed"] == 2

    # A worker with one free device claims neither the job nor its preflight, through its loop or the store.
    ctx = build_context(api.settings, store=api.store, artifacts=api.artifacts, worker_id="one-gpu", devices="1")
    ctx.fork_server = False
    worker = Worker(ctx)
    assert ctx.devices and len(ctx.devices) == 1
    assert worker.run_once() is False and worker.running_work == [] and worker.running_jobs == []
    assert api.store.work.get(api.users["alice"], item.id).state == WorkState.QUEUED
    assert api.store.queue.claim("one-gpu", ["preflight"], devices=1, lease_s=60) is None
    claimed = api.store.queue.claim("two-gpus", ["preflight"], devices=2, lease_s=60)
    assert claimed is not None and claimed.item_id == item.id and claimed.devices_needed == 2


def test_a_preflight_without_devices_runs_on_cpu_like_its_job(api: AppHarness) -> None:
    model = api.base_model("alice")
    dataset = api.dataset("alice", name="cpu-data")
    inputs = {"base_model_id": model["id"], "train_dataset_id": dataset["id"], "config": FAST}
    job = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json={"name": "on-cpu", **inputs})
    assert job.status_code == 201, job.text
    queued = api.client.post(f"{API}/preflight", headers=api.auth("alice"), json=inputs)
    assert queued.status_code == 202, queued.text
    item = api.store.work.get(api.users["alice"], queued.json()["id"])
    assert item.devices_needed == job.json()["devices_needed"] == 0
    claimed = api.store.queue.claim("cpu-only", ["preflight"], devices=0, lease_s=60)
    assert claimed is not None and claimed.item_id == item.id
