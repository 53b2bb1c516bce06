"""DELETE routes answer 202 with a receipt; receipts are their askers' own; users and exports can be deleted."""

from __future__ import annotations

from tests.fixtures.app import API, AppHarness
from tunedeck.service.jobs.job_models import export_prefix
from tunedeck.storage.base import user_prefix


def _version(api: AppHarness, user: str, name: str) -> tuple[str, int]:
    owner = api.users[user]
    dataset = api.store.datasets.create_dataset(owner, name)
    key = f"{user_prefix(owner.id)}/datasets/dsu_{name}/data.jsonl"
    api.artifacts.put_bytes(key, b'{"text": "hi"}\n')
    version = api.store.datasets.add_version(owner, dataset.id, sha256="c" * 64, format="jsonl", rows=1,
                                             storage_key=key)  # fmt: skip
    return dataset.id, version.version


def test_receipts_list_newest_first_and_another_users_answers_404(api: AppHarness) -> None:
    first = api.client.delete(f"{API}/datasets/{_version(api, 'alice', 'a')[0]}", headers=api.auth("alice")).json()
    dataset_id, number = _version(api, "alice", "b")
    second = api.client.delete(f"{API}/datasets/{dataset_id}/versions/{number}", headers=api.auth("alice"))
    assert second.status_code == 202 and second.json()["target_kind"] == "dataset_version"
    assert second.json()["target_label"] == "b v1"
    listed = api.client.get(f"{API}/deletions", headers=api.auth("alice")).json()
    assert [r["id"] for r in listed] == [second.json()["id"], first["id"]]
    assert api.client.get(f"{API}/deletions", headers=api.auth("bob")).json() == []
    for user in ("bob", "root"):
        assert api.client.get(f"{API}/deletions/{first['id']}", headers=api.auth(user)).status_code == 404
    assert api.client.get(f"{API}/datasets/{dataset_id}", headers=api.auth("alice")).status_code == 200


def test_an_export_is_deleted_and_another_users_export_answers_404(api: AppHarness) -> None:
    alice = api.users["alice"]
    dataset_id, _ = _version(api, "alice", "chats")
    version = api.store.datasets.list_versions(alice, dataset_id)[0]
    job = api.store.jobs.enqueue(alice, name="run", config={"epochs": 1}, train_dataset_version_id=version.id)
    prefix = export_prefix(alice.id, job.id, "adapter-final")
    api.artifacts.put_bytes(f"{prefix}/adapter.safetensors", b"w")
    url = f"{API}/jobs/{job.id}/exports/adapter-final"
    assert api.client.delete(url, headers=api.auth("bob")).status_code == 404
    answer = api.client.delete(url, headers=api.auth("alice"))
    assert answer.status_code == 202 and answer.json()["target_id"] == f"{job.id}/adapter-final"
    assert api.run_work(("delete",)) == 1
    assert api.artifacts.list(prefix) == []
    assert api.client.get(f"{API}/jobs/{job.id}", headers=api.auth("alice")).status_code == 200


def test_an_admin_deletes_a_user_and_everything_stored_under_them(api: AppHarness) -> None:
    _version(api, "bob", "notes")
    assert api.client.delete(f"{API}/users/bob", headers=api.auth("alice")).status_code == 403
    assert api.client.delete(f"{API}/users/root", headers=api.auth("root")).status_code == 403
    answer = api.client.delete(f"{API}/users/bob", headers=api.auth("root"))
    assert answer.status_code == 202 and answer.json()["target_label"] == "bob"
    assert api.client.get(f"{API}/me", headers=api.auth("bob")).status_code == 401
    assert api.run_work(("delete",)) == 1
    assert api.artifacts.list(user_prefix(api.users["bob"].id)) == []
    receipt = api.client.get(answer.headers["Location"], headers=api.auth("root")).json()
    assert receipt["state"] == "done"
    assert {"database", "storage"} <= {line["where"] for line in receipt["removed"]}
    assert api.client.delete(f"{API}/users/bob", headers=api.auth("root")).status_code == 404
