"""A unique string planted in a dataset: with encryption at rest, no store ever holds it in plaintext,
a worker holds it only while the job that needs it runs, and deleting the dataset with its models
leaves it nowhere (the data dir, the database files, worker folders, caches, the bucket).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.fixtures.app import API, AppHarness, model_roots_for, running_worker, start_harness
from tests.waiting import HANG_S
from tunedeck.core.settings import Settings

from ..worker.seeding import TINY_JOB_CONFIG, chat_rows

CANARY = b"canary-" + secrets.token_hex(12).encode()


def _rows_with_canary() -> bytes:
    rows = chat_rows(12)
    for row in rows[::3]:
        row["messages"][0]["content"] += f" (note {CANARY.decode()})"
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _files_holding_canary(*roots: Path) -> list[str]:
    """Every file under `roots` whose bytes contain the canary."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink() and CANARY in path.read_bytes():
                found.append(str(path))
    return found


def _objects_holding_canary(storage_url: str, endpoint: str | None) -> list[str]:
    """Every stored object whose raw bytes (as the bucket's operator reads them) contain the canary."""
    if not storage_url.startswith("s3://"):
        return _files_holding_canary(Path(urlparse(storage_url).path))
    import boto3

    client = boto3.session.Session().client("s3", endpoint_url=endpoint)
    bucket = urlparse(storage_url).netloc
    found = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            if CANARY in body:
                found.append(item["Key"])
    return found


def _waited(harness: AppHarness, url: str, done: tuple[str, ...], what: str) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + HANG_S * 4
    while time.monotonic() < deadline:
        body = harness.client.get(url, headers=harness.auth("alice")).json()
        if body["state"] in done:
            return body  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise AssertionError(f"{what} did not end: {body}")


@pytest.fixture(params=["local", "s3"])
def encrypted(request: pytest.FixtureRequest, tmp_path: Path, sqlite_url: str) -> Iterator[AppHarness]:
    """The app and a worker's store on an encrypted local folder or S3 bucket (server-side encryption on too)."""
    key = base64.b64encode(secrets.token_bytes(32)).decode()
    extra: dict[str, object] = {}
    if request.param == "s3":
        extra = {
            "storage_url": request.getfixturevalue("s3_store_url"),
            "s3_endpoint_url": request.getfixturevalue("s3_server"),
            "s3_sse": "AES256",
        }
    settings = Settings(
        data_dir=tmp_path / "data", database_url=sqlite_url, model_roots=model_roots_for(tmp_path),
        encryption_keys=f"k1:{key}", **extra,  # type: ignore[arg-type]
    )  # fmt: skip
    yield from start_harness(settings)


def test_a_canary_is_never_stored_in_plaintext_and_deleting_leaves_it_nowhere(
    encrypted: AppHarness, tmp_path: Path, tiny_llama_dir: Path
) -> None:
    api, alice = encrypted, encrypted.auth("alice")
    storage_url, endpoint = api.settings.resolved_storage_url(), api.settings.s3_endpoint_url
    everything = (tmp_path,)  # the data dir (runs, caches, uploads), the SQLite files beside it
    with running_worker(api, jobs=1):
        uploaded = api.client.post(
            f"{API}/datasets", params={"wait": HANG_S}, headers=alice,
            files={"file": ("train.jsonl", _rows_with_canary())}, data={"name": "secret"},
        )  # fmt: skip
        assert uploaded.status_code == 200 and uploaded.json()["state"] == "succeeded", uploaded.text
        dataset_id = uploaded.json()["result"]["dataset_id"]
        preview = api.client.get(f"{API}/datasets/{dataset_id}/preview", headers=alice)
        assert CANARY.decode() in preview.text  # the owner reads it back through the server...
        assert _objects_holding_canary(storage_url, endpoint) == []  # ...the stores hold ciphertext only
        assert _files_holding_canary(api.settings.data_dir / "uploads") == []  # the received file is gone

        model = api.client.post(f"{API}/base-models", headers=alice, json={"local_path": str(tiny_llama_dir)})
        assert model.status_code == 201, model.text
        created = api.client.post(f"{API}/jobs", headers=alice, json={
            "name": "canary-job", "base_model_id": model.json()["id"], "train_dataset_id": dataset_id,
            "config": {**TINY_JOB_CONFIG, "save_steps": 3},
        })  # fmt: skip
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        job = _waited(api, f"{API}/jobs/{job_id}", ("succeeded", "failed", "cancelled"), "the job")
        assert job["state"] == "succeeded", job
        exported = api.client.post(
            f"{API}/jobs/{job_id}/exports", params={"wait": HANG_S}, headers=alice, json={"format": "adapter"}
        )
        assert exported.status_code == 200 and exported.json()["state"] == "succeeded", exported.text
        assert _objects_holding_canary(storage_url, endpoint) == []
        # The worker's copy of the training data went with the job's run folder, once its results were committed.
        runs = api.settings.resolved_runs_dir()
        deadline = time.monotonic() + HANG_S
        while _files_holding_canary(runs) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _files_holding_canary(runs) == []

        refused = api.client.delete(f"{API}/datasets/{dataset_id}", headers=alice)
        assert refused.status_code == 409 and job_id in refused.text  # it trained a model: asked first
        asked = api.client.delete(f"{API}/datasets/{dataset_id}", params={"with_models": "true"}, headers=alice)
        assert asked.status_code == 202, asked.text
        receipt = _waited(api, asked.headers["Location"], ("done", "failed"), "the deletion")
        assert receipt["state"] == "done", receipt
    places = {line["where"] for line in receipt["removed"]}
    assert {"database", "storage"} <= places
    assert any(line["where"] == "storage" and job_id in line["what"] for line in receipt["removed"])
    assert api.client.get(f"{API}/jobs/{job_id}", headers=alice).status_code == 404
    assert _objects_holding_canary(storage_url, endpoint) == []
    assert _files_holding_canary(*everything) == []
