"""`GET /jobs/{id}/report`: the final job report, its guards and its contamination warnings."""

from __future__ import annotations

import json
from typing import Any

from tests.fixtures.app import API, AppHarness
from tests.fixtures.job_claims import claim_job
from tests.unit.eval.report_data import BASELINE, evaluation
from tunedeck.storage.base import job_prefix
from tunedeck.store.train_policy import JobEnd

GUARDS = ["per_class.promo.f1 >= baseline", "eval_loss <= baseline"]
CONTAMINATION = {"contaminated": True, "pairs_by_split": {"validation": 2}, "threshold": 0.8, "pairs": []}


def _finished_job(api: AppHarness, **body: Any) -> dict[str, Any]:
    """A succeeded job of alice's with the run files a worker uploads (baseline, final, data manifest)."""
    dataset = api.dataset("alice", name="train")
    model = api.base_model("alice")
    request = {"name": "rank-64", "base_model_id": model["id"], "train_dataset_id": dataset["id"], **body}
    created = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=request)
    assert created.status_code == 201, created.text
    job = created.json()
    claimed = claim_job(api.store, "test-worker", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == job["id"]
    run = f"{job_prefix(api.users['alice'].id, job['id'])}/run"
    final = evaluation(0.83, 0.45, {"ham": 0.95, "spam": 0.90, "promo": 0.20})
    documents = {
        "baseline_eval.json": BASELINE,
        "final_eval.json": final,
        "data_manifest.json": {"datasets": [], "tokenization": {}, "contamination": CONTAMINATION},
    }
    for name, document in documents.items():
        api.artifacts.put_bytes(f"{run}/{name}", json.dumps(document).encode())
    api.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd("succeeded"))
    return job


def test_report_flags_the_guards_the_job_declared(api: AppHarness) -> None:
    job = _finished_job(api, guards=GUARDS)
    response = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice"))
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["job_id"] == job["id"] and report["state"] == "succeeded"
    assert report["model"]["base_model"] == "org/tiny-model" and report["model"]["artifact"].endswith("/final")
    verdicts = {guard["guard"]: guard["passed"] for guard in report["guards"]}
    assert verdicts == {"per_class.promo.f1 >= baseline": False, "eval_loss <= baseline": True}
    assert report["limits"]["guard_violations"] == ["per_class.promo.f1 >= baseline"]
    assert {row["class"] for row in report["limits"]["classes_worse"]} == {"promo"}
    # Extra guards for one look, without changing the job's own.
    extra = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice"),
                           params={"guard": ["accuracy >= 0.9"]}).json()  # fmt: skip
    assert extra["limits"]["guard_violations"] == ["per_class.promo.f1 >= baseline", "accuracy >= 0.9"]

    markdown = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice"),
                              params={"format": "markdown"})  # fmt: skip
    assert markdown.status_code == 200 and markdown.headers["content-type"].startswith("text/markdown")
    assert "# Job report: rank-64" in markdown.text
    assert "**VIOLATED**: `per_class.promo.f1 >= baseline`" in markdown.text
    assert "guard violated: per_class.promo.f1 >= baseline" in markdown.text


def test_report_warns_of_the_contamination_the_run_found(api: AppHarness) -> None:
    # The upload's dedup report sees only the training data and finds no contamination; the run
    # compared training and validation rows and recorded two overlaps in data_manifest.json.
    job = _finished_job(api)
    report = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice")).json()
    warnings = report["limits"]["contamination"]
    assert len(warnings) == 1 and "2 training row(s) duplicate rows of the validation split" in warnings[0]
    markdown = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice"),
                              params={"format": "markdown"}).text  # fmt: skip
    assert "scores on validation may overstate what the model learned" in markdown


def test_bad_guards_are_422_naming_the_entry_and_nothing_is_queued(api: AppHarness) -> None:
    dataset, model = api.dataset("alice"), api.base_model("alice")
    body = {"name": "x", "base_model_id": model["id"], "train_dataset_id": dataset["id"],
            "guards": ["accuracy >= 0.5", "accuracy >> 2", {"metric": "f1"}]}  # fmt: skip
    response = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=body)
    assert response.status_code == 422, response.text
    assert [issue["field"] for issue in response.json()["issues"]] == ["guards[1]", "guards[2]"]
    assert api.client.get(f"{API}/jobs", headers=api.auth("alice")).json()["items"] == []


def test_a_clone_keeps_the_guards_and_json_guards_are_accepted(api: AppHarness) -> None:
    guard = {"metric": "json_valid_rate", "comparator": ">=", "threshold": "baseline", "tolerance": 0.02}
    job = _finished_job(api, guards=[guard])
    clone = api.client.post(f"{API}/jobs/{job['id']}/clone", headers=api.auth("alice"), json={"config": {}})
    assert clone.status_code == 201, clone.text
    report = api.client.get(f"{API}/jobs/{clone.json()['id']}/report", headers=api.auth("alice")).json()
    # Not run yet: no verdict, but the guard travelled with the clone (shown once it has a final model).
    assert report["state"] == "queued" and report["guards"] == []
    original = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice")).json()
    assert [g["guard"] for g in original["guards"]] == ["json_valid_rate >= baseline - 0.02"]
    from tunedeck.service.jobs.job_guards import read_job_guards

    stored_clone = api.store.jobs.get(api.users["alice"], clone.json()["id"])
    assert read_job_guards(api.artifacts, stored_clone) == ["json_valid_rate >= baseline - 0.02"]


def test_another_user_gets_404_for_the_report(api: AppHarness) -> None:
    job = _finished_job(api, guards=GUARDS)
    for params in ({}, {"format": "markdown"}):
        response = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("bob"), params=params)
        assert response.status_code == 404 and "rank-64" not in response.text
    assert api.client.get(f"{API}/jobs/job_nope/report", headers=api.auth("alice")).status_code == 404
    assert api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("root")).status_code == 200


def test_the_markdown_report_shows_a_hostile_job_name_as_text(api: AppHarness) -> None:
    job = _finished_job(api, name='<img src=x onerror="fetch(`//x`)">')
    markdown = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice"),
                              params={"format": "markdown"})  # fmt: skip
    assert markdown.status_code == 200
    assert "<img" not in markdown.text
    assert markdown.text.startswith('# Job report: &lt;img src=x onerror="fetch(\\`//x\\`)">')


def test_guards_are_kept_in_the_jobs_row_and_older_jobs_still_read_their_file(api: AppHarness) -> None:
    from tunedeck.service.jobs.job_guards import read_job_guards

    job = _finished_job(api, guards=GUARDS)
    stored = api.store.jobs.get(api.users["alice"], job["id"])
    # Queued with the job in one transaction: nothing about them is written to storage.
    assert stored.guards == ["per_class.promo.f1 >= baseline", "eval_loss <= baseline"]
    assert not any(key.endswith("guards.json") for key in api.artifacts.list(""))

    # A job queued before guards had a column (NULL) kept them in a file beside its artifacts.
    older = api.store.jobs.enqueue(api.users["alice"], name="older", config={"epochs": 1})
    assert older.guards == [] and read_job_guards(api.artifacts, older) == []
    with api.store.db.write() as session:
        session.get(type(older), older.id).guards = None  # as the migration leaves such rows
    legacy = api.store.jobs.get(api.users["alice"], older.id)
    key = f"{job_prefix(api.users['alice'].id, older.id)}/guards.json"
    api.artifacts.put_bytes(key, json.dumps({"guards": ["eval_loss <= baseline"]}).encode())
    assert read_job_guards(api.artifacts, legacy) == ["eval_loss <= baseline"]
