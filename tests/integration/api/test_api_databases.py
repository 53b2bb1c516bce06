"""One pass through the API on every supported database (SQLite, and PostgreSQL when it runs)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.app import API, make_settings, start_harness
from tunedeck.store.records import MetricPoint, NewEvent


def test_api_smoke_on_each_database(tmp_path: Path, database_url: str) -> None:
    for api in start_harness(make_settings(tmp_path, database_url)):
        assert api.client.get(f"{API}/health").json()["database"] == "ok"
        job = api.job("alice", name="smoke")
        api.store.telemetry.append_events(job["id"], 1, [NewEvent(seq=1, type="log", payload={"x": 1.5})])
        api.store.telemetry.append_metrics(job["id"], [MetricPoint(name="loss", step=1, value=1.25)])
        page = api.client.get(f"{API}/jobs", headers=api.auth("alice"), params={"name": "smo"}).json()
        assert [j["id"] for j in page["items"]] == [job["id"]]
        assert api.client.get(f"{API}/jobs/{job['id']}", headers=api.auth("bob")).status_code == 404
        events = api.client.get(f"{API}/jobs/{job['id']}/events", headers=api.auth("alice")).json()
        assert events[0]["data"]["x"] == 1.5
        series = api.client.get(f"{API}/jobs/{job['id']}/metrics/loss", headers=api.auth("alice")).json()
        assert series["points"] == [{"step": 1, "value": 1.25}]
        cancelled = api.client.post(f"{API}/jobs/{job['id']}/cancel", headers=api.auth("alice")).json()
        assert cancelled["state"] == "cancelled"
