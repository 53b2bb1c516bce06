"""The access log: each read of a user's raw data writes one entry, and only its owner (or an admin) sees it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from tests.fixtures.app import API, AppHarness, jsonl_rows, sign_in, uploaded_id
from tunedeck.service.jobs.job_models import export_prefix
from tunedeck.storage.base import final_prefix
from tunedeck.store.models import TestSetAccess

WEIGHTS = "weights.safetensors"


def _log(api: AppHarness, user: str, **params: Any) -> dict[str, Any]:
    answer = api.client.get(f"{API}/access-log", headers=api.auth(user), params=params)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _entries(api: AppHarness, user: str) -> list[dict[str, Any]]:
    return list(_log(api, user)["items"])


def _uploaded(api: AppHarness, user: str = "alice") -> tuple[str, str]:
    """A dataset of `user`: its id and its first version's id."""
    dataset_id = uploaded_id(api.upload(user, jsonl_rows(3), name="secrets"))
    versions = api.client.get(f"{API}/datasets/{dataset_id}/versions", headers=api.auth(user)).json()
    return dataset_id, versions[0]["id"]


def _folder(tmp: Path, name: str) -> Path:
    folder = tmp / name
    folder.mkdir()
    (folder / WEIGHTS).write_bytes(b"\x00" * 32)
    return folder


def test_a_preview_is_logged_once_and_a_workers_ingestion_is_not(api: AppHarness) -> None:
    dataset_id, version_id = _uploaded(api)
    assert _entries(api, "alice") == []  # the worker's reads are the owner's own work
    answer = api.client.get(f"{API}/datasets/{dataset_id}/preview", headers=api.auth("alice"))
    assert answer.status_code == 200
    [entry] = _entries(api, "alice")
    alice = api.users["alice"]
    assert entry["owner_id"] == alice.id and entry["reader_id"] == alice.id and entry["reader_name"] == "alice"
    assert (entry["object_kind"], entry["object_id"], entry["object_label"]) == (
        "dataset_version",
        version_id,
        "secrets v1",
    )
    assert (entry["action"], entry["via"], entry["client_address"]) == ("preview", "api", "testclient")
    assert entry["at"]


def test_a_refused_preview_of_a_sealed_test_set_reads_nothing_and_logs_nothing(api: AppHarness) -> None:
    dataset_id, _ = _uploaded(api)
    assert api.client.post(f"{API}/datasets/{dataset_id}/seal", headers=api.auth("alice")).status_code == 200
    assert api.client.get(f"{API}/datasets/{dataset_id}/preview", headers=api.auth("alice")).status_code == 409
    assert _entries(api, "alice") == []


def test_a_sealed_test_set_read_keeps_its_own_record_and_is_logged(api: AppHarness) -> None:
    _, version_id = _uploaded(api)
    alice = api.users["alice"]
    api.store.datasets.seal(alice, version_id)
    api.store.datasets.record_test_set_access(alice, version_id, purpose="final evaluation")
    with api.store.db.read() as session:
        assert len(list(session.scalars(select(TestSetAccess)))) == 1
    [entry] = _entries(api, "alice")
    assert (entry["object_kind"], entry["object_id"], entry["action"], entry["via"]) == (
        "test_set",
        version_id,
        "read",
        "cli",
    )
    assert entry["reader_id"] == alice.id and entry["client_address"] is None


def test_downloads_of_exports_checkpoints_and_final_models_are_logged(api: AppHarness, tmp_path: Path) -> None:
    alice = api.users["alice"]
    job = api.store.jobs.enqueue(alice, name="tuned", config={"epochs": 1})
    api.commit_checkpoint(job.id, 2, tmp_path, {"weights.safetensors": b"\x01" * 16})
    api.artifacts.commit_directory(_folder(tmp_path, "final"), final_prefix(alice.id, job.id))
    api.artifacts.commit_directory(_folder(tmp_path, "export"), export_prefix(alice.id, job.id, "adapter-final"))
    base = f"{API}/jobs/{job.id}"
    expected = [
        (f"{base}/checkpoints/2/archive", "checkpoint", "checkpoint 2 of job tuned"),
        (
            f"{base}/checkpoints/2/files/weights.safetensors",
            "checkpoint",
            "weights.safetensors of checkpoint 2 of job tuned",
        ),
        (f"{base}/final/archive", "final_model", "final model of job tuned"),
        (
            f"{base}/final/files/weights.safetensors",
            "final_model",
            "weights.safetensors of the final model of job tuned",
        ),
        (f"{base}/exports/adapter-final/archive", "export", "export adapter-final of job tuned"),
    ]
    for count, (url, kind, label) in enumerate(expected, start=1):
        answer = api.client.get(url, headers=api.auth("alice"))
        assert answer.status_code == 200, (url, answer.text)
        entries = _entries(api, "alice")
        assert len(entries) == count, url  # exactly one more per download
        newest = entries[0]
        assert (newest["object_kind"], newest["object_id"], newest["object_label"]) == (kind, job.id, label)
        assert (newest["action"], newest["via"], newest["reader_id"]) == ("download", "api", alice.id)
    # A download of something absent read nothing.
    assert api.client.get(f"{base}/exports/merged-final/archive", headers=api.auth("alice")).status_code == 404
    assert len(_entries(api, "alice")) == len(expected)


def test_an_admins_read_is_logged_with_the_admin_as_reader_and_others_see_nothing(
    api: AppHarness, tmp_path: Path
) -> None:
    alice, root = api.users["alice"], api.users["root"]
    job = api.store.jobs.enqueue(alice, name="tuned", config={"epochs": 1})
    api.artifacts.commit_directory(_folder(tmp_path, "final"), final_prefix(alice.id, job.id))
    assert api.client.get(f"{API}/jobs/{job.id}/final/archive", headers=api.auth("root")).status_code == 200
    [entry] = _entries(api, "alice")
    assert entry["owner_id"] == alice.id and entry["reader_id"] == root.id and entry["reader_name"] == "root"
    assert _entries(api, "root") == []  # the admin's own data was not read
    assert _entries(api, "bob") == []
    bob_asks = api.client.get(f"{API}/access-log", headers=api.auth("bob"), params={"owner": alice.id})
    assert bob_asks.status_code == 404
    assert "not found" in bob_asks.json()["detail"]
    assert [e["id"] for e in _log(api, "root", owner=alice.id)["items"]] == [entry["id"]]
    unknown = api.client.get(f"{API}/access-log", headers=api.auth("root"), params={"owner": "usr_nobody"})
    assert unknown.status_code == 404


def test_the_log_pages_newest_first(api: AppHarness) -> None:
    dataset_id, _ = _uploaded(api)
    for _ in range(3):
        api.client.get(f"{API}/datasets/{dataset_id}/preview", headers=api.auth("alice"))
    first = _log(api, "alice", limit=2)
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = _log(api, "alice", limit=2, cursor=first["next_cursor"])
    ids = [e["id"] for e in first["items"] + rest["items"]]
    assert len(ids) == 3 and ids == sorted(ids, reverse=True) and rest["next_cursor"] is None
    bad = api.client.get(f"{API}/access-log", headers=api.auth("alice"), params={"cursor": "x"})
    assert bad.status_code == 422


def test_the_dashboard_logs_a_dataset_page_and_shows_the_access_log(web: AppHarness) -> None:
    dataset_id = uploaded_id(web.upload("alice", jsonl_rows(3), name="notes"))
    sign_in(web.client, web.tokens["alice"])
    assert web.client.get(f"/datasets/{dataset_id}").status_code == 200
    page = web.client.get("/account/access-log")
    assert page.status_code == 200
    assert 'href="/account/access-log"' in page.text  # in the user's menu
    assert "<h1>Access log</h1>" in page.text
    row = page.text[page.text.index('data-entry-id="') :]
    assert "dataset: notes v1" in row and "preview" in row and "dashboard" in row and ">alice" in row
    [entry] = web.store.access_log.list(web.users["alice"]).items
    assert entry.via == "web" and entry.action == "preview"
    # Another user's page lists none of it.
    web.client.cookies.clear()
    sign_in(web.client, web.tokens["bob"])
    assert "No reads of your data" in web.client.get("/account/access-log").text
