"""Dataset upload through the API: valid, invalid (422 with lines, nothing registered), limits, reads."""

from __future__ import annotations

import json

from tests.fixtures.app import API, MAX_UPLOAD_BYTES, MAX_UPLOAD_ROWS, AppHarness, jsonl_rows, uploaded_id


def _nothing_registered(api: AppHarness, user: str = "alice") -> None:
    assert api.client.get(f"{API}/datasets", headers=api.auth(user)).json() == []
    assert api.artifacts.list("") == []
    incoming = api.settings.data_dir / "uploads" / "incoming"
    assert not incoming.exists() or list(incoming.iterdir()) == []


def test_an_upload_is_answered_at_once_and_ingested_by_a_worker(api: AppHarness) -> None:
    queued = api.client.post(
        f"{API}/datasets", headers=api.auth("alice"), files={"file": ("qa.jsonl", jsonl_rows(3))}, data={"name": "qa"}
    )
    assert queued.status_code == 202, queued.text
    item = queued.json()
    assert item["kind"] == "ingest" and item["state"] == "queued"
    # Nothing is registered before a worker has read the rows; the upload waits in the user's storage.
    assert api.client.get(f"{API}/datasets", headers=api.auth("alice")).json() == []
    assert [key.split("/")[2] for key in api.artifacts.list("")] == ["uploads"]
    assert api.run_work(("ingest",)) == 1
    done = api.client.get(f"{API}/work/{item['id']}", headers=api.auth("alice")).json()
    assert done["state"] == "succeeded", done
    assert done["result"]["name"] == "qa" and done["result"]["version"] == 1 and done["result"]["rows"] == 3
    assert done["progress"]["phase"] == "storing"
    # The received upload is gone; only the version's files remain.
    assert {key.split("/")[2] for key in api.artifacts.list("")} == {"datasets"}


def test_recording_an_ingested_upload_twice_keeps_one_version(api: AppHarness) -> None:
    alice = api.users["alice"]
    fields = {"sha256": "0" * 64, "format": "text", "rows": 1, "kind": "text", "manifest": {}, "reports": {}}
    key = "users/x/datasets/dsu_retry/data.jsonl"
    first = api.store.datasets.store_upload(alice, dataset_id=None, name="once", storage_key=key, **fields)
    again = api.store.datasets.store_upload(alice, dataset_id=None, name="once", storage_key=key, **fields)
    assert again[0].id == first[0].id and again[1].id == first[1].id
    assert [v.version for v in api.store.datasets.list_versions(alice, first[0].id)] == [1]


def test_valid_upload_registers_a_version_with_preview_and_reports(api: AppHarness) -> None:
    created = api.upload("alice", jsonl_rows(5), filename="qa.jsonl", name="qa")
    body = api.client.get(f"{API}/datasets/{uploaded_id(created)}", headers=api.auth("alice")).json()
    assert body["name"] == "qa"
    assert body["versions"] == 1
    latest = body["latest"]
    assert latest["rows"] == 5 and latest["kind"] == "prompt_completion" and latest["version"] == 1
    assert len(latest["sha256"]) == 64 and latest["size_bytes"] > 0

    listed = api.client.get(f"{API}/datasets", headers=api.auth("alice")).json()
    assert [d["id"] for d in listed] == [body["id"]]

    preview = api.client.get(f"{API}/datasets/{body['id']}/preview?limit=2", headers=api.auth("alice")).json()
    assert preview["total_rows"] == 5
    assert preview["rows"] == [
        {"prompt": "Question 0: what is 0 plus 0?", "completion": "It is 0."},
        {"prompt": "Question 1: what is 1 plus 1?", "completion": "It is 2."},
    ]
    for name in ("validation", "dedup", "scan"):
        report = api.client.get(f"{API}/datasets/{body['id']}/reports/{name}", headers=api.auth("alice"))
        assert report.status_code == 200, report.text
        assert report.json()["name"] == name
    validation = api.client.get(f"{API}/datasets/{body['id']}/reports/validation", headers=api.auth("alice"))
    assert validation.json()["report"]["rows_valid"] == 5

    # The stored file holds the canonical rows, under a generated name, never the client's.
    version = api.store.datasets.get_version(api.users["alice"], latest["id"])
    assert "qa.jsonl" not in version.storage_key
    stored = api.artifacts.read_bytes(version.storage_key).decode().splitlines()
    assert [json.loads(line)["completion"] for line in stored] == [f"It is {2 * i}." for i in range(5)]


def test_invalid_rows_give_422_with_every_line_and_register_nothing(api: AppHarness) -> None:
    content = b'{"prompt": "a", "completion": "b"}\n{"prompt": 3}\n{"prompt": "c", "completion": "d"}\nnot json\n'
    response = api.upload("alice", content, filename="bad.jsonl")
    assert response.status_code == 422, response.text
    issues = response.json()["issues"]
    assert {issue["line"] for issue in issues} == {2, 4}
    assert all(issue["file"] == "bad.jsonl" for issue in issues)
    # The server's generated path never reaches the client.
    assert "upload-" not in response.text and str(api.settings.data_dir) not in response.text
    _nothing_registered(api)


def test_drop_invalid_registers_the_valid_rows_and_reports_the_rest(api: AppHarness) -> None:
    content = jsonl_rows(3) + b'{"prompt": 3}\n'
    response = api.upload("alice", content, drop_invalid="true")
    dataset_id = uploaded_id(response)
    latest = api.client.get(f"{API}/datasets/{dataset_id}", headers=api.auth("alice")).json()["latest"]
    assert latest["rows"] == 3 and latest["dropped_rows"] == 1
    report = api.client.get(
        f"{API}/datasets/{dataset_id}/reports/validation", headers=api.auth("alice")
    ).json()["report"]
    assert report["dropped_lines"] == [4]


def test_upload_over_the_size_limit_is_413(api: AppHarness) -> None:
    response = api.upload("alice", b"x" * (MAX_UPLOAD_BYTES + 1))
    assert response.status_code == 413
    _nothing_registered(api)


def test_upload_over_the_row_limit_is_413(api: AppHarness) -> None:
    response = api.upload("alice", jsonl_rows(MAX_UPLOAD_ROWS + 1))
    assert response.status_code == 413
    assert str(MAX_UPLOAD_ROWS) in response.json()["detail"]
    _nothing_registered(api)


def test_malformed_multipart_and_bad_form_fields_are_4xx(api: AppHarness) -> None:
    headers = {**api.auth("alice"), "content-type": "multipart/form-data; boundary=zzz"}
    assert api.client.post(f"{API}/datasets", headers=headers, content=b"garbage").status_code == 400
    assert api.client.post(f"{API}/datasets", headers=api.auth("alice"), json={"a": 1}).status_code == 415
    bad_name = api.upload("alice", jsonl_rows(2), name="../etc")
    assert bad_name.status_code == 422 and bad_name.json()["issues"][0]["field"] == "name"
    unknown_field = api.upload("alice", jsonl_rows(2), colour="blue")
    assert unknown_field.status_code == 422
    bad_format = api.upload("alice", jsonl_rows(2), format="poetry")
    assert bad_format.status_code == 422 and bad_format.json()["issues"][0]["field"] == "format"
    _nothing_registered(api)


def test_same_name_is_409_and_a_new_version_goes_through_versions(api: AppHarness) -> None:
    first = api.dataset("alice", rows=2, name="notes")
    assert api.upload("alice", jsonl_rows(2), name="notes").status_code == 409
    second = api.upload("alice", jsonl_rows(4), filename="v2.jsonl", to=first["id"])
    assert second.status_code == 200, second.text
    assert second.json()["result"]["version"] == 2 and second.json()["result"]["dataset_id"] == first["id"]
    versions = api.client.get(f"{API}/datasets/{first['id']}/versions", headers=api.auth("alice")).json()
    assert [v["rows"] for v in versions] == [2, 4]
    old = api.client.get(f"{API}/datasets/{first['id']}/preview?version=1", headers=api.auth("alice")).json()
    assert old["total_rows"] == 2


def test_delete_removes_rows_and_stored_files(api: AppHarness) -> None:
    dataset = api.dataset("alice")
    assert api.artifacts.list("") != []
    answer = api.client.delete(f"{API}/datasets/{dataset['id']}", headers=api.auth("alice"))
    assert answer.status_code == 202 and answer.json()["state"] == "pending"
    assert answer.headers["Location"] == f"{API}/deletions/{answer.json()['id']}"
    assert api.client.get(f"{API}/datasets/{dataset['id']}", headers=api.auth("alice")).status_code == 404
    assert api.run_work(("delete",)) == 1
    assert api.artifacts.list("") == []
    receipt = api.client.get(answer.headers["Location"], headers=api.auth("alice")).json()
    assert receipt["state"] == "done" and any(line["where"] == "storage" for line in receipt["removed"])


def test_a_cancelled_ingestion_removes_its_upload(api: AppHarness) -> None:
    queued = api.client.post(
        f"{API}/datasets", headers=api.auth("alice"), files={"file": ("qa.jsonl", jsonl_rows(3))}, data={"name": "qa"}
    )
    assert queued.status_code == 202, queued.text
    assert api.artifacts.list("") != []  # the upload waits in storage for a worker
    cancelled = api.client.post(f"{API}/work/{queued.json()['id']}/cancel", headers=api.auth("alice"))
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert api.artifacts.list("") == []
    assert api.run_work(("ingest",)) == 0  # nothing left to claim
    _nothing_registered(api)


def test_a_form_boolean_is_true_or_false_only(api: AppHarness) -> None:
    for written in ("0", "1", "yes", "on"):
        refused = api.upload("alice", jsonl_rows(2), drop_invalid=written)
        assert refused.status_code == 422, refused.text
        assert refused.json()["issues"][0]["field"] == "drop_invalid"
    _nothing_registered(api)
    assert api.upload("alice", jsonl_rows(2), drop_invalid="false").status_code == 200


def test_column_map_renames_fields_and_is_kept_with_the_version(api: AppHarness) -> None:
    rows = b'{"question": "What is 2+2?", "answer": "4"}\n{"question": "Capital of France?", "answer": "Paris"}\n'
    mapping = "instruction=question, output=answer"
    created = api.upload("alice", rows, filename="qa.jsonl", name="qa", column_map=mapping)
    dataset_id = uploaded_id(created)
    latest = api.client.get(f"{API}/datasets/{dataset_id}", headers=api.auth("alice")).json()["latest"]
    assert latest["source_format"] == "alpaca" and latest["rows"] == 2
    assert latest["column_map"] == {"instruction": "question", "output": "answer"}
    report = api.client.get(f"{API}/datasets/{dataset_id}/reports/validation", headers=api.auth("alice")).json()
    assert report["report"]["column_map"] == {"instruction": "question", "output": "answer"}

    # The same file read through another mapping is another version, recording its own mapping.
    again = api.upload("alice", b'{"sentence": "good", "category": "pos"}\n', to=dataset_id,
                       column_map="text=sentence", label_column="category")  # fmt: skip
    assert again.status_code == 200, again.text
    versions = api.client.get(f"{API}/datasets/{dataset_id}/versions", headers=api.auth("alice")).json()
    assert [v["column_map"] for v in versions] == [
        {"instruction": "question", "output": "answer"},
        {"text": "sentence", "label": "category"},
    ]
    assert versions[1]["kind"] == "classification"


def test_a_malformed_or_missing_column_map_is_422_naming_it(api: AppHarness) -> None:
    for text in ("instruction", "a=b,a=c", "=question", "instruction="):
        response = api.upload("alice", jsonl_rows(2), column_map=text)
        assert response.status_code == 422, text
        assert response.json()["issues"][0]["field"] == "column_map"
    both = api.upload("alice", jsonl_rows(2), label_column="category", column_map="label=kind")
    assert both.status_code == 422 and "named twice" in both.json()["issues"][0]["message"]
    _nothing_registered(api)
    missing = api.upload("alice", jsonl_rows(2), filename="qa.jsonl", column_map="prompt=question")
    assert missing.status_code == 422
    issue = missing.json()["issues"][0]
    assert issue["field"] == "question" and issue["file"] == "qa.jsonl" and issue["line"] == 1
    assert "prompt=question" in issue["expected"]
