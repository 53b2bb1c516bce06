"""Experiments through the API and the dashboard: a hypothesis, variants (one failed), the comparison."""

from __future__ import annotations

import json
import re

from tests.fixtures.app import AppHarness, sign_in
from tunedeck.core.states import JobState
from tunedeck.store.models import Job

API = "/api/v1"


def _variant(web: AppHarness, experiment_id: str, name: str, **config: object) -> str:
    base = web.store.base_models.register(web.users["alice"], name="m", hub_id="org/tiny", revision="main")
    job = web.store.jobs.enqueue(
        web.users["alice"],
        name=name,
        config={"epochs": 1, **config},
        base_model_id=base.id,
        experiment_id=experiment_id,
    )
    return job.id


def test_experiment_api_compares_every_variant_and_hides_it_from_others(web: AppHarness) -> None:
    alice = {"Authorization": f"Bearer {web.tokens['alice']}"}
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
    assert variants[higher]["config_diff"]["learning_rate"] == {
        "reference": 5e-5,
        "variant": 2e-4,
        "group": "optimisation",
    }
    assert variants[reference]["config_diff"] == {}
    assert variants[broken]["state"] == "failed"
    assert "NaN" in (variants[broken]["reason"] or "")

    html = web.client.get(f"{API}/experiments/{experiment['id']}/comparison?format=html", headers=alice)
    assert html.headers["content-type"].startswith("text/html")
    assert "broken" in html.text and not re.search(r'(src|href)="https?://', html.text)
    markdown = web.client.get(f"{API}/experiments/{experiment['id']}/comparison?format=markdown", headers=alice)
    assert "higher" in markdown.text

    bob = {"Authorization": f"Bearer {web.tokens['bob']}"}
    for path in ("", "/comparison"):
        assert web.client.get(f"{API}/experiments/{experiment['id']}{path}", headers=bob).status_code == 404
    assert web.client.get(f"{API}/experiments", headers=bob).json() == []


def test_bad_guard_is_refused_by_name(web: AppHarness) -> None:
    alice = {"Authorization": f"Bearer {web.tokens['alice']}"}
    answer = web.client.post(f"{API}/experiments", headers=alice, json={"name": "x", "guards": ["accuracy >> 2"]})
    assert answer.status_code == 422
    assert "accuracy >> 2" in answer.text


def test_dashboard_creates_an_experiment_and_shows_its_variants(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
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


def _final_eval(accuracy: float, f1_yes: float, present: float) -> bytes:
    metrics = {
        "accuracy": accuracy,
        "per_class": {"yes": {"f1": f1_yes, "precision": f1_yes, "recall": f1_yes}},
        "fields": {"answer": {"present_rate": present, "exact_match": present / 2}},
    }
    return json.dumps({"metrics": metrics, "procedure_sha256": "p" * 64}).encode()


def test_experiment_page_shows_reference_deltas_tables_and_overlaid_curves(web: AppHarness) -> None:
    from tunedeck.storage.base import job_prefix
    from tunedeck.store.records import MetricPoint

    csrf = sign_in(web.client, web.tokens["alice"])
    experiment = web.store.experiments.create(
        web.users["alice"],
        name="rank",
        hypothesis="r=16 beats r=8",
        reference_config={"lora_r": 8, "epochs": 1, "guards": []},
    )
    reference = _variant(web, experiment.id, "rank-8", lora_r=8)
    higher = _variant(web, experiment.id, "rank-16", lora_r=16)
    artifacts = web.client.app.state.tunedeck.artifacts  # type: ignore[attr-defined]
    for job_id, (accuracy, f1_yes, present) in {reference: (0.5, 0.4, 0.8), higher: (0.75, 0.6, 1.0)}.items():
        prefix = job_prefix(web.users["alice"].id, job_id)
        artifacts.put_bytes(f"{prefix}/run/final_eval.json", _final_eval(accuracy, f1_yes, present))
        artifacts.put_bytes(f"{prefix}/run/baseline_eval.json", _final_eval(0.25, 0.1, 0.5))
        web.store.telemetry.append_metrics(job_id, [MetricPoint("loss", s, 3.0 - s / 10) for s in range(1, 21)])
    web.store.telemetry.append_metrics(higher, [MetricPoint("eval_loss", 10, 2.0), MetricPoint("eval_loss", 20, 1.5)])

    page = web.client.get(f"/experiments/{experiment.id}")
    assert page.status_code == 200, page.text
    text = page.text
    assert "Δreference +0.25" in text  # accuracy of rank-16 against rank-8
    assert "Δbaseline +0.5" in text
    assert 'id="per-class"' in text and "<caption>f1</caption>" in text and ">yes</th>" in text
    assert 'id="per-field"' in text and "<caption>present_rate</caption>" in text and ">answer</th>" in text
    assert text.count("<polyline") == 3  # two training-loss curves and one evaluation-loss curve
    assert 'data-series="eval_loss" data-points="2"' in text
    assert "style=" not in text  # the page's CSP allows no inline style
    assert csrf


def test_new_experiment_form_validates_its_reference_config(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/experiments")
    assert 'for="exp-reference_config"' in page.text
    nonce = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert nonce is not None

    def post(reference: str) -> object:
        data = {"name": "e", "guards": "", "reference_config": reference, "csrf_token": nonce.group(1)}
        return web.client.post("/experiments", data=data, follow_redirects=False)

    for bad, message in (
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"learning_rate": 7}', "learning_rate"),
        ('{"no_such_key": 1}', "no_such_key"),
        ('{"validation_dataset_id": "ds_nope"}', "validation_dataset_id"),
    ):
        answer = post(bad)
        assert answer.status_code == 422, bad  # type: ignore[attr-defined]
        error = re.search(r'id="err-exp-reference_config" role="alert">([^<]*)<', answer.text)  # type: ignore[attr-defined]
        assert error is not None and message in error.group(1), (bad, error and error.group(1))
        assert "{not json" not in bad or "{not json" in answer.text  # type: ignore[attr-defined]  # the text is kept

    created = post('{"learning_rate": 2e-4, "epochs": 2}')
    assert created.status_code == 303  # type: ignore[attr-defined]
    experiment_id = created.headers["location"].rsplit("/", 1)[-1]  # type: ignore[attr-defined]
    stored = web.store.experiments.get(web.users["alice"], experiment_id).reference_config
    assert stored == {"learning_rate": 2e-4, "epochs": 2, "guards": []}
