"""A dataset's licence and rights note: set at upload or with PATCH, shown in job reports; never via /v1/files."""

from __future__ import annotations

import json
from typing import Any

from tests.fixtures.app import API, AppHarness, jsonl_rows, uploaded_id
from tests.fixtures.job_claims import claim_job
from tunedeck.core.model_licence import ModelLicence
from tunedeck.storage.base import job_prefix
from tunedeck.store.train_policy import JobEnd


def _dataset(api: AppHarness, dataset_id: str, user: str = "alice") -> Any:
    return api.client.get(f"{API}/datasets/{dataset_id}", headers=api.auth(user))


def test_an_upload_records_the_licence_and_rights_note_given_beside_the_file(api: AppHarness) -> None:
    answer = api.upload("alice", jsonl_rows(3), name="qa", licence=" cc-by-4.0 ", rights_note="From the FAQ.\r\nOurs.")
    body = _dataset(api, uploaded_id(answer)).json()
    assert (body["licence"], body["rights_note"]) == ("cc-by-4.0", "From the FAQ.\nOurs.")
    assert api.client.get(f"{API}/datasets", headers=api.auth("alice")).json()[0]["licence"] == "cc-by-4.0"

    plain = _dataset(api, uploaded_id(api.upload("alice", jsonl_rows(2), name="plain"))).json()
    assert plain["licence"] is None and plain["rights_note"] is None  # not recorded, never guessed

    # A new version that names a licence replaces the dataset's; one that names none keeps it.
    api.upload("alice", jsonl_rows(4), to=body["id"])
    assert _dataset(api, body["id"]).json()["licence"] == "cc-by-4.0"
    api.upload("alice", jsonl_rows(5), to=body["id"], licence="mit")
    assert _dataset(api, body["id"]).json()["licence"] == "mit"


def test_a_bad_licence_at_upload_is_422_naming_the_field_and_nothing_is_registered(api: AppHarness) -> None:
    for field, value, expected in (
        ("licence", "x" * 201, "at most 200 characters"),
        ("licence", "cc-by\n4.0", "one line of text without control characters"),
        ("rights_note", "ok\x1b[2J", "the character U+001B"),
        ("rights_note", "é" * 1001, "at most 1000 characters"),
    ):
        refused = api.upload("alice", jsonl_rows(2), name="qa", **{field: value})
        assert refused.status_code == 422, refused.text
        issue = refused.json()["issues"][0]
        assert issue["field"] == field and expected in issue["message"]
    assert api.client.get(f"{API}/datasets", headers=api.auth("alice")).json() == []
    # The longest note fits in a form field whatever its characters (4 bytes each at most in UTF-8).
    longest = api.upload("alice", jsonl_rows(2), name="qa", rights_note="\U0001f600" * 1000)
    assert _dataset(api, uploaded_id(longest)).json()["rights_note"] == "\U0001f600" * 1000


def test_patch_records_changes_and_clears_the_rights(api: AppHarness) -> None:
    dataset = api.dataset("alice", name="qa")
    path = f"{API}/datasets/{dataset['id']}"
    changed = api.client.patch(path, headers=api.auth("alice"), json={"licence": "cc-by-sa-4.0"})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["licence"], changed.json()["rights_note"]) == ("cc-by-sa-4.0", None)
    noted = api.client.patch(path, headers=api.auth("alice"), json={"rights_note": "Written by our staff."})
    assert (noted.json()["licence"], noted.json()["rights_note"]) == ("cc-by-sa-4.0", "Written by our staff.")
    cleared = api.client.patch(path, headers=api.auth("alice"), json={"licence": None, "rights_note": ""})
    assert (cleared.json()["licence"], cleared.json()["rights_note"]) == (None, None)

    for body, field in (({"licence": "a\tb"}, "licence"), ({"licence": 3}, "licence"), ({"colour": "x"}, "colour")):
        refused = api.client.patch(path, headers=api.auth("alice"), json=body)
        assert refused.status_code == 422, refused.text
        assert field in json.dumps(refused.json()["issues"])
    empty = api.client.patch(path, headers=api.auth("alice"), json={})
    assert empty.status_code == 422 and "at least one of licence, rights_note" in empty.text
    # Another user's dataset is not found, and stays as it was.
    assert api.client.patch(path, headers=api.auth("bob"), json={"licence": "mit"}).status_code == 404
    assert _dataset(api, dataset["id"]).json()["licence"] is None


def test_openai_file_uploads_take_no_licence(api: AppHarness) -> None:
    def upload(**fields: str) -> Any:
        return api.while_working(
            ("ingest",),
            lambda: api.client.post(
                "/v1/files", headers=api.auth("alice"), files={"file": ("train.jsonl", jsonl_rows(2))},
                data={"purpose": "fine-tune", **fields},
            ),
        )  # fmt: skip

    refused = upload(licence="mit")
    assert refused.status_code == 400, refused.text
    assert "licence" in refused.text
    stored = upload()
    assert stored.status_code == 200, stored.text
    (dataset,) = api.client.get(f"{API}/datasets", headers=api.auth("alice")).json()
    assert dataset["licence"] is None and dataset["rights_note"] is None


def test_the_job_report_shows_the_datasets_licence_and_the_base_models(api: AppHarness) -> None:
    answer = api.upload("alice", jsonl_rows(3), name="faq", licence="cc-by-4.0", rights_note="Public FAQ pages.")
    dataset_id = uploaded_id(answer)
    model = api.base_model("alice")
    request = {"name": "licensed", "base_model_id": model["id"], "train_dataset_id": dataset_id}
    job = api.client.post(f"{API}/jobs", headers=api.auth("alice"), json=request).json()
    claimed = claim_job(api.store, "test-worker", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == job["id"]
    run_config = {"config": {}, "model": {"name": "org/tiny-model", "licence": ModelLicence(
        licence="apache-2.0", source="README.md front matter").to_dict()}}  # fmt: skip
    api.artifacts.put_bytes(f"{job_prefix(api.users['alice'].id, job['id'])}/run/config.json",
                            json.dumps(run_config).encode())  # fmt: skip
    api.store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd("succeeded"))

    report = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice")).json()
    assert report["model"]["base_model_licence"] == "apache-2.0 (from the base model's README.md front matter)"
    (data,) = report["datasets"]
    assert (data["role"], data["version"], data["licence"], data["rights_note"]) == (
        "train",
        1,
        "cc-by-4.0",
        "Public FAQ pages.",
    )
    # A licence changed later shows in the next report.
    api.client.patch(f"{API}/datasets/{dataset_id}", headers=api.auth("alice"), json={"licence": "cc-by-nc-4.0"})
    markdown = api.client.get(f"{API}/jobs/{job['id']}/report", headers=api.auth("alice"),
                              params={"format": "markdown"}).text  # fmt: skip
    assert "## Training data" in markdown
    assert "licence: cc-by-nc-4.0" in markdown and "rights: Public FAQ pages." in markdown
    assert "**base_model_licence:** apache-2.0 (from the base model's README.md front matter)" in markdown
