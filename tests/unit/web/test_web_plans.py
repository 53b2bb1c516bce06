"""The rental plan pages: the form, the chart of phases over days, and the warning when the rental runs short."""

from __future__ import annotations

import re
from datetime import timedelta

from tests.fixtures.app import AppHarness, sign_in
from tests.fixtures.job_claims import claim_job
from tunedeck.store.models import Job
from tunedeck.store.records import MetricPoint, NewEvent
from tunedeck.store.types import utcnow

API = "/api/v1"


def _experiment(web: AppHarness) -> str:
    answer = web.client.post(
        f"{API}/experiments", headers=web.auth("alice"), json={"name": "rank", "reference_config": {"epochs": 1}}
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def test_the_form_makes_a_plan_and_its_page_draws_the_phases(web: AppHarness) -> None:
    experiment_id = _experiment(web)
    csrf = sign_in(web.client, web.tokens["alice"])
    form = web.client.get("/plans")
    assert form.status_code == 200 and 'id="plan-form"' in form.text and "rank" in form.text
    fields = {
        "csrf_token": csrf, "experiment_id": experiment_id, "variants": "r8\nr16:2", "device_type": "H100",
        "device_count": "1", "train_rows": "50000", "validation_rows": "500", "test_rows": "500",
        "model_params": "7e9", "price_per_hour": "2.5", "margin_share": "0.2", "efficiency": "0.3",
    }  # fmt: skip
    made = web.client.post("/plans", data=fields, follow_redirects=False)
    assert made.status_code == 303, made.text
    page = web.client.get(made.headers["location"])
    assert page.status_code == 200
    svg = re.search(r'<figure class="chart plan-chart">.*?</figure>', page.text, re.S)
    assert svg is not None
    bars = re.findall(r'<rect [^>]*class="phase (\w+)"', svg.group(0))
    # Seven phases (two variants) and the margin; nothing measured: every phase bar is an estimate.
    assert bars.count("estimated") == 7 and bars.count("margin") == 2  # the margin row and its legend swatch
    assert "3-day rental" in svg.group(0) or "day 1" in svg.group(0)
    for text in ("Variant r16", "Final evaluation and sealed test", "Reload in a new process", "Export", "6 ×"):
        assert text in page.text
    assert "The rental starts now" in page.text
    assert web.client.get("/plans").text.count("/plans/plan_") >= 1


def test_the_form_names_what_is_wrong(web: AppHarness) -> None:
    experiment_id = _experiment(web)
    csrf = sign_in(web.client, web.tokens["alice"])
    fields = {"csrf_token": csrf, "experiment_id": experiment_id, "variants": "v", "device_type": "H100",
              "train_rows": "lots", "device_count": "1"}  # fmt: skip
    answer = web.client.post("/plans", data=fields)
    assert answer.status_code == 422 and "Expected a whole number, found &#39;lots&#39;" in answer.text
    fields["train_rows"] = "100"
    answer = web.client.post("/plans", data=fields)
    assert answer.status_code == 422 and "model&#39;s size" in answer.text


def test_a_slow_variant_warns_on_the_plan_and_the_experiment_pages(web: AppHarness) -> None:
    experiment_id = _experiment(web)
    body = {"experiment_id": experiment_id, "machine": {"device_type": "H100"}, "variants": [
        {"name": "a"}, {"name": "b"}, {"name": "c"}], "train_rows": 100_000, "model_params": 7e9}  # fmt: skip
    plan = web.client.post(f"{API}/plans", headers=web.auth("alice"), json=body).json()
    alice = web.users["alice"]
    web.store.plans.start(alice, plan["id"], now=utcnow() - timedelta(hours=10))
    base = web.store.base_models.register(alice, name="m", hub_id="org/tiny", revision="main")
    job = web.store.jobs.enqueue(alice, name="a", config={"epochs": 1}, base_model_id=base.id,
                                 experiment_id=experiment_id)  # fmt: skip
    claimed = claim_job(web.store, "w", devices=0, lease_s=600)
    assert claimed is not None and claimed.job_id == job.id
    with web.store.db.write() as session:  # it has run 9 hours for one step in a thousand
        session.get(Job, job.id).started_at = utcnow() - timedelta(hours=9)  # type: ignore[union-attr]
    web.store.telemetry.append_events(job.id, claimed.attempt, [
        NewEvent(seq=1, type="phase", payload={"phase": "training", "total_steps": 1000})])  # fmt: skip
    web.store.telemetry.append_metrics(job.id, [MetricPoint(name="loss", step=1, value=2.0)])

    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/plans/{plan['id']}")
    assert page.status_code == 200
    assert "after the rental ends" in page.text
    assert "drop variant c" in page.text and "drop variant b" in page.text
    assert 'class="projected late"' in page.text
    experiment_page = web.client.get(f"/experiments/{experiment_id}")
    assert experiment_page.status_code == 200
    assert "after the rental ends" in experiment_page.text and "drop variant c" in experiment_page.text


def test_another_users_plan_page_is_404(web: AppHarness) -> None:
    experiment_id = _experiment(web)
    body = {"experiment_id": experiment_id, "machine": {"device_type": "H100"}, "variants": [{"name": "v"}],
            "train_rows": 100, "model_params": 7e9}  # fmt: skip
    plan = web.client.post(f"{API}/plans", headers=web.auth("alice"), json=body).json()
    sign_in(web.client, web.tokens["bob"])
    assert web.client.get(f"/plans/{plan['id']}").status_code == 404
