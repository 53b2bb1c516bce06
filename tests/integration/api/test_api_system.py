"""Health, version, OpenAPI docs, config schema and recipes, base-model registration checks."""

from __future__ import annotations

import re
from pathlib import Path

import tunedeck
from tests.fixtures.app import API, AppHarness


def test_health_and_version_need_no_token(api: AppHarness) -> None:
    health = api.client.get(f"{API}/health")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "database": "ok", "storage": "ok"}
    assert api.client.get(f"{API}/version").json() == {"name": "tunedeck", "version": tunedeck.__version__, "api": "v1"}


def test_health_reports_a_broken_database(api: AppHarness) -> None:
    api.store.db.engine.dispose()
    database = Path(api.settings.resolved_database_url().removeprefix("sqlite:///"))
    database.unlink()
    database.mkdir()  # a folder where the file was: every connection fails
    response = api.client.get(f"{API}/health")
    assert response.status_code == 503
    assert response.json()["database"] == "unavailable"


def test_openapi_docs_are_served(api: AppHarness) -> None:
    assert api.client.get("/docs").status_code == 200
    paths = api.client.get("/openapi.json").json()["paths"]
    upload = paths[f"{API}/datasets"]["post"]
    assert "multipart/form-data" in upload["requestBody"]["content"]


def test_the_docs_page_loads_swagger_ui_from_this_server(api: AppHarness) -> None:
    page = api.client.get("/docs").text
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in assets
    assert "/static/vendor/swagger-ui/swagger-ui.css" in assets
    assert all(url.startswith("/") for url in assets), assets  # nothing from another host
    for url in assets:
        assert api.client.get(url).status_code == 200, url
    assert api.client.get("/redoc").status_code == 404  # it would need another vendored bundle


def test_config_schema_recipes_and_dry_run(api: AppHarness) -> None:
    headers = api.auth("bob")
    schema = api.client.get(f"{API}/config/schema", headers=headers).json()
    assert "learning_rate" in schema["properties"]
    recipes = api.client.get(f"{API}/config/recipes", headers=headers).json()
    assert "instruction-tuning-lora" in {r["name"] for r in recipes}
    one = api.client.get(f"{API}/config/recipes/quick-experiment", headers=headers).json()
    assert one["values"]["save_strategy"] == "no"
    assert api.client.get(f"{API}/config/recipes/nope", headers=headers).status_code == 404
    ok = api.client.post(f"{API}/config/validate", headers=headers, json={"epochs": 2})
    assert ok.status_code == 200 and ok.json()["config"]["epochs"] == 2 and ok.json()["warnings"] == []
    warned = api.client.post(f"{API}/config/validate", headers=headers,
                             json={"lr_scheduler": "constant", "warmup_ratio": 0.2})
    assert warned.status_code == 200
    assert [w["field"] for w in warned.json()["warnings"]] == ["warmup_ratio"]
    assert "constant_with_warmup" in warned.json()["warnings"][0]["expected"]
    # With the training set's size the schedule is checked: 96 rows in batches of 8 × 4 make 3 steps, 2 of warmup.
    short = api.client.post(f"{API}/config/validate?examples=96", headers=headers,
                            json={"epochs": 1, "batch_size": 8, "warmup_ratio": 0.9})  # fmt: skip
    assert [w["field"] for w in short.json()["warnings"]] == ["warmup_ratio", "epochs"]
    assert "2 of the 3 step(s) are warmup" in short.json()["warnings"][0]["message"]
    bad = api.client.post(f"{API}/config/validate", headers=headers, json={"batch_size": 0})
    assert bad.status_code == 422 and bad.json()["issues"][0]["field"] == "batch_size"
    assert api.client.get(f"{API}/config/schema").status_code == 401


def test_base_model_registration_checks_its_source(api: AppHarness, tmp_path: Path) -> None:
    url = f"{API}/base-models"
    headers = api.auth("alice")
    hub = api.client.post(url, headers=headers, json={"hub_id": "org/model"})
    assert hub.status_code == 201 and hub.json()["revision"] == "main" and hub.json()["source"] == "hub"
    for bad in (
        {},
        {"hub_id": "org/model", "local_path": "/tmp"},
        {"hub_id": "../../etc"},
        {"hub_id": "org/model", "revision": "a b"},
        {"local_path": "relative/model"},
    ):
        response = api.client.post(url, headers=headers, json=bad)
        assert response.status_code == 422, (bad, response.text)
    # Well-formed paths that name no model folder answer like an unknown id.
    for missing in (str(tmp_path), str(tmp_path / "missing")):  # the first has no config.json and weights
        response = api.client.post(url, headers=headers, json={"local_path": missing})
        assert response.status_code == 404 and response.json()["issues"][0]["field"] == "local_path", response.text
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    (model_dir / "model.safetensors").write_bytes(b"w")
    local = api.client.post(url, headers=headers, json={"local_path": str(model_dir), "name": "tiny"})
    assert local.status_code == 201, local.text
    assert local.json()["local_path"] == str(model_dir) and local.json()["revision"] is None
    listed = api.client.get(url, headers=headers).json()
    assert [m["name"] for m in listed] == ["model", "tiny"]
    assert api.client.delete(f"{url}/{local.json()['id']}", headers=headers).status_code == 204
    assert api.client.get(f"{url}/{local.json()['id']}", headers=headers).status_code == 404
