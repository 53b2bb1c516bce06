"""The scan policy of an upload: warn reports, block refuses with nothing stored, redact stores masked rows."""

from __future__ import annotations

import json
from typing import Any

from tests.fixtures.app import API, AppHarness, uploaded_id

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
EMAIL = "jane.roe@example.com"


def _rows_with_secrets() -> bytes:
    rows = [
        {"prompt": "Which key?", "completion": f"Use {AWS_KEY} for the bucket."},
        {"prompt": "Who to mail?", "completion": f"Write to {EMAIL} please."},
        {"prompt": "Clean row", "completion": "Nothing to hide here."},
    ]
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _scan(api: AppHarness, dataset_id: str) -> dict:
    response = api.client.get(f"{API}/datasets/{dataset_id}/reports/scan", headers=api.auth("alice"))
    assert response.status_code == 200, response.text
    return response.json()["report"]


def _dataset(api: AppHarness, answer: Any) -> dict[str, Any]:
    return api.client.get(f"{API}/datasets/{uploaded_id(answer)}", headers=api.auth("alice")).json()


def _stored_rows(api: AppHarness, dataset: dict) -> list[dict]:
    version = api.store.datasets.get_version(api.users["alice"], dataset["latest"]["id"])
    return [json.loads(line) for line in api.artifacts.read_bytes(version.storage_key).decode().splitlines()]


def test_warn_is_the_default_and_keeps_the_rows(api: AppHarness) -> None:
    created = _dataset(api, api.upload("alice", _rows_with_secrets(), name="warned"))
    report = _scan(api, created["id"])
    assert report["policy"] == "warn" and report["counts"] == {"aws_access_key": 1, "email": 1}
    assert AWS_KEY not in json.dumps(report)  # findings are masked in the report
    assert AWS_KEY in _stored_rows(api, created)[0]["completion"]


def test_block_refuses_the_upload_naming_each_finding_and_stores_nothing(api: AppHarness) -> None:
    refused = api.upload("alice", _rows_with_secrets(), filename="leaky.jsonl", scan_policy="block")
    assert refused.status_code == 422, refused.text
    issues = refused.json()["issues"]
    assert {(issue["line"], issue["field"]) for issue in issues} == {(1, "completion"), (2, "completion")}
    assert all(issue["file"] == "leaky.jsonl" for issue in issues)
    assert AWS_KEY not in refused.text and EMAIL not in refused.text
    assert api.client.get(f"{API}/datasets", headers=api.auth("alice")).json() == []
    assert api.artifacts.list("") == []


def test_redact_stores_masked_rows_and_new_versions_keep_the_policy(api: AppHarness) -> None:
    dataset = _dataset(api, api.upload("alice", _rows_with_secrets(), name="redacted", scan_policy="redact"))
    rows = _stored_rows(api, dataset)
    assert rows[0]["completion"] == "Use [REDACTED:aws_access_key] for the bucket."
    assert rows[1]["completion"] == "Write to [REDACTED:email] please."
    assert rows[2]["completion"] == "Nothing to hide here."
    report = _scan(api, dataset["id"])
    assert report["policy"] == "redact" and report["redacted"] == {"aws_access_key": 1, "email": 1}
    preview = api.client.get(f"{API}/datasets/{dataset['id']}/preview", headers=api.auth("alice")).json()
    assert AWS_KEY not in json.dumps(preview) and EMAIL not in json.dumps(preview)

    # A second version sent without a policy is redacted too: the policy belongs to the dataset.
    second = api.upload("alice", _rows_with_secrets(), filename="v2.jsonl", to=dataset["id"])
    assert second.status_code == 200, second.text
    version = api.store.datasets.get_version(api.users["alice"], second.json()["result"]["version_id"])
    stored = api.artifacts.read_bytes(version.storage_key).decode()
    assert AWS_KEY not in stored and EMAIL not in stored


def test_an_unknown_policy_is_a_field_error(api: AppHarness) -> None:
    response = api.upload("alice", _rows_with_secrets(), scan_policy="ignore")
    assert response.status_code == 422
    assert response.json()["issues"][0]["field"] == "scan_policy"
