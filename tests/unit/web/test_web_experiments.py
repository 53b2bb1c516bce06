"""Experiments through the API and the dashboard: a hypothesis, variants (one failed), the comparison."""

from __future__ import annotations

import re

from tunedeck.core.states import JobState
from tunedeck.jobs.models import Job

from .conftest import WebApp, sign_in

API = "/api/v1"


def _variant(web: WebApp, experiment_id: str, name: str, **config: object) -> str:
    base = web.store.base_models.register(web.alice, name="m", hub_id="org/tiny", revision="main")
    job = web.store.jobs.enqueue(
        web.alice, name=name, config={"epochs": 1, **config}, base_model_id=base.id, experiment_id=experiment_id
    )
    return job.id


def test_experiment_api_compares_every_variant_and_hides_it_from_others(web: WebApp) -> None:
    alice = {"Authorization": f"Bearer {web.alice_token}"}
    created = web.client.post(
        f"{API}/experiments",
        headers=alice,
        json={
            "name": "lr sweep",
            "hypothesis": "A higher learning rate lowers eval loss without hurting JSON validity.",
            "reference_config": {"epochs": 1, "learning_rate": 5e-5},
            "guards": ["json_valid_rate >= baseline"],
        },
    )
    assert created.status_code == 201, created.text
    experiment = created.json()
    assert experiment["guards"] == ["json_valid_rate >= baseline"]
    assert "guards" not in experiment["reference_config"]

    reference = _variant(web, experiment["id"], "reference", learning_rate=5e-5)
    higher = _variant(web, experiment["id"], "higher", learning_rate=2e-4)
    broken = _variant(web, experiment["id"], "broken", learning_rate=1e-3)
    with web.store.db.write() as session:
        row = session.get(Job, broken)
        row.state = JobState.FAILED.value
        row.error_message = "loss became NaN at step 3"

    comparison = web.client.get(f"{API}/experiments/{experiment['id']}/comparison", headers=alice)
    assert comparison.status_code == 200, comparison.text
    variants = {v["job_id"]: v for v in comparison.json()["variants"]}
    assert set(variants) == {reference, higher, broken}
    assert variants[higher]["config_diff"]["learning_rate"] == {"reference": 5e-5, "variant": 2e-4}
    assert variants[reference]["config_diff"] == {}
    assert variants[broken]["state"] == "failed"
    assert "NaN" in (variants[broken]["reason"] or "")

    html = web.client.get(f"{API}/experiments/{experiment['id']}/comparison?format=html", headers=alice)
    assert html.headers["content-type"].startswith("text/html")
    assert "broken" in html.text and not re.search(r'(src|href)="https?://', html.text)
    markdown = web.client.get(f"{API}/experiments/{experiment['id']}/comparison?format=markdown", headers=alice)
    assert "higher" in markdown.text

    bob = {"Authorization": f"Bearer {web.bob_token}"}
    for path in ("", "/comparison"):
        assert web.client.get(f"{API}/experiments/{experiment['id']}{path}", headers=bob).status_code == 404
    assert web.client.get(f"{API}/experiments", headers=bob).json() == []


def test_bad_guard_is_refused_by_name(web: WebApp) -> None:
    alice = {"Authorization": f"Bearer {web.alice_token}"}
    answer = web.client.post(f"{API}/experiments", headers=alice, json={"name": "x", "guards": ["accuracy >> 2"]})
    assert answer.status_code == 422
    assert "accuracy >> 2" in answer.text


def test_dashboard_creates_an_experiment_and_shows_its_variants(web: WebApp) -> None:
    csrf = sign_in(web.client, web.alice_token)
    page = web.client.get("/experiments")
    assert page.status_code == 200 and 'for="exp-hypothesis"' in page.text
    form_token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert form_token is not None and csrf
    answer = web.client.post(
        "/experiments",
        data={
            "name": "rank",
            "hypothesis": "r=16 beats r=8",
            "guards": "accuracy >= 0.5",
            "csrf_token": form_token.group(1),
        },
        follow_redirects=False,
    )
    assert answer.status_code == 303
    experiment_id = answer.headers["location"].rsplit("/", 1)[-1]
    _variant(web, experiment_id, "rank-16", lora_r=16)
    shown = web.client.get(f"/experiments/{experiment_id}")
    assert shown.status_code == 200
    assert "rank-16" in shown.text and "r=16 beats r=8" in shown.text

    missing_csrf = web.client.post("/experiments", data={"name": "no token"}, follow_redirects=False)
    assert missing_csrf.status_code == 403
    assert web.client.get("/experiments/exp_doesnotexist").status_code == 404
