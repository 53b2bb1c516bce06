"""`/api/v1/plans`: a rental planned around an experiment's phases, its tracking, and who may see it."""

from __future__ import annotations

from typing import Any

from tests.fixtures.app import API, AppHarness
from tunedeck.core.states import WorkKind
from tunedeck.store.kind_policy import ItemEnd

PREFLIGHT_REPORT: dict[str, Any] = {
    "status": "pass",
    "ok": True,
    "seconds": 300.0,
    "hardware": {"backend": "cuda", "device_name": "NVIDIA L4", "device_count": 1},
    "checks": [
        {"number": 6, "name": "checkpoint_cycle", "status": "pass", "seconds": 60.0, "figures": {}},
        {
            "number": 7,
            "name": "throughput",
            "status": "pass",
            "seconds": 30.0,
            "figures": {"examples_per_second": 4.0, "evaluation": {"seconds_per_row": 0.25}},
        },
    ],
}


def _experiment(api: AppHarness, user: str, name: str = "lr") -> str:
    answer = api.client.post(
        f"{API}/experiments", headers=api.auth(user), json={"name": name, "reference_config": {"epochs": 2}}
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _finished_preflight(api: AppHarness, user: str, worker_id: str) -> str:
    """A preflight work item of `user` that `worker_id` ran to the end with PREFLIGHT_REPORT."""
    item, _ = api.store.work.submit(api.users[user], WorkKind.PREFLIGHT.value, {"config": {}})
    claimed = api.store.queue.claim(worker_id, (WorkKind.PREFLIGHT.value,), 1, 60)
    assert claimed is not None and claimed.item_id == item.id
    result = {"status": "pass", "ok": True, "report": PREFLIGHT_REPORT}
    assert api.store.queue.finish(claimed.item_id, claimed.fencing_token, ItemEnd.succeeded(result))
    return item.id


def test_a_plan_on_a_worker_uses_what_it_measured_and_tracks_the_rental(api: AppHarness) -> None:
    experiment_id = _experiment(api, "alice")
    _finished_preflight(api, "alice", "gpu-box-1")
    body = {
        "experiment_id": experiment_id,
        "machine": {"worker_id": "gpu-box-1"},
        "variants": [{"name": "lr-1e-4"}, {"name": "lr-3e-4", "epochs": 3}],
        "train_rows": 8_000,
        "validation_rows": 400,
        "test_rows": 400,
        "price_per_hour": 0.8,
    }
    created = api.client.post(f"{API}/plans", headers=api.auth("alice"), json=body)
    assert created.status_code == 201, created.text
    plan = created.json()
    assert plan["machine"] == {"device_type": "NVIDIA L4", "device_count": 1, "worker_id": "gpu-box-1"}
    assert plan["figures"]["train_examples_per_second"]["source"] == "measured"
    assert plan["figures"]["export_seconds"]["source"] == "estimated"
    phases = {phase["key"]: phase for phase in plan["timeline"]["phases"]}
    assert phases["variant:lr-1e-4"]["seconds"] == 8_000 * 2 / 4.0 + 400 * 0.25  # the reference's 2 epochs
    assert phases["variant:lr-3e-4"]["seconds"] == 8_000 * 3 / 4.0 + 400 * 0.25
    assert plan["timeline"]["shortest_rental_days"] == 3
    assert plan["timeline"]["rentals"][0]["cost"] == 3 * 24 * 0.8
    assert plan["tracking"] is None

    started = api.client.post(f"{API}/plans/{plan['id']}/start", headers=api.auth("alice"))
    assert started.status_code == 200, started.text
    tracking = started.json()["tracking"]
    assert tracking["rental_days"] == 3 and tracking["late"] is False
    assert [phase["status"] for phase in tracking["phases"]][:2] == ["running", "waiting"]
    again = api.client.post(f"{API}/plans/{plan['id']}/start", headers=api.auth("alice"))
    assert again.status_code == 409

    listed = api.client.get(f"{API}/plans", headers=api.auth("alice"), params={"experiment_id": experiment_id})
    assert [entry["id"] for entry in listed.json()] == [plan["id"]]
    shown = api.client.get(f"{API}/plans/{plan['id']}", headers=api.auth("alice")).json()
    assert shown["started_at"] is not None and shown["tracking"]["phases"]


def test_another_users_plan_is_404_and_not_listed(api: AppHarness) -> None:
    experiment_id = _experiment(api, "alice")
    body = {"experiment_id": experiment_id, "machine": {"device_type": "A100", "device_count": 2},
            "variants": [{"name": "v"}], "train_rows": 100, "model_params": 1e9}  # fmt: skip
    plan = api.client.post(f"{API}/plans", headers=api.auth("alice"), json=body).json()
    assert all(figure["source"] == "estimated" for figure in plan["figures"].values())
    for method, path in (("GET", f"/plans/{plan['id']}"), ("POST", f"/plans/{plan['id']}/start")):
        answer = api.client.request(method, f"{API}{path}", headers=api.auth("bob"))
        assert answer.status_code == 404, answer.text
    assert api.client.get(f"{API}/plans", headers=api.auth("bob")).json() == []
    # Nor can bob plan on alice's experiment.
    answer = api.client.post(f"{API}/plans", headers=api.auth("bob"), json=body)
    assert answer.status_code == 404


def test_bad_input_names_the_field(api: AppHarness) -> None:
    experiment_id = _experiment(api, "alice")
    base = {"experiment_id": experiment_id, "machine": {"device_type": "H100"}, "variants": [{"name": "v"}]}
    missing_rows = api.client.post(f"{API}/plans", headers=api.auth("alice"), json={**base, "model_params": 1e9})
    assert missing_rows.status_code == 422
    assert missing_rows.json()["issues"][0]["field"] == "train_rows"
    no_size = api.client.post(f"{API}/plans", headers=api.auth("alice"), json={**base, "train_rows": 10})
    assert no_size.status_code == 422 and no_size.json()["issues"][0]["field"] == "model_params"
    unknown = {**base, "train_rows": 10, "model_params": 1e9, "machine": {"device_type": "abacus"}}
    answer = api.client.post(f"{API}/plans", headers=api.auth("alice"), json=unknown)
    assert answer.status_code == 422 and answer.json()["issues"][0]["field"] == "machine.device_type"
    both = {**base, "train_rows": 10, "machine": {"device_type": "H100", "worker_id": "w"}}
    assert api.client.post(f"{API}/plans", headers=api.auth("alice"), json=both).status_code == 422
    no_worker = {**base, "train_rows": 10, "machine": {"worker_id": "never-seen"}}
    answer = api.client.post(f"{API}/plans", headers=api.auth("alice"), json=no_worker)
    assert answer.status_code == 422 and answer.json()["issues"][0]["field"] == "machine.worker_id"


def test_deleting_the_experiment_deletes_its_plans(api: AppHarness) -> None:
    experiment_id = _experiment(api, "alice")
    body = {"experiment_id": experiment_id, "machine": {"device_type": "H100"}, "variants": [{"name": "v"}],
            "train_rows": 100, "model_params": 1e9}  # fmt: skip
    plan = api.client.post(f"{API}/plans", headers=api.auth("alice"), json=body).json()
    assert api.client.delete(f"{API}/experiments/{experiment_id}", headers=api.auth("alice")).status_code == 204
    assert api.client.get(f"{API}/plans/{plan['id']}", headers=api.auth("alice")).status_code == 404
