"""The whole service path on S3: upload → create job → worker trains → checkpoints in S3 → download the adapter."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

from fastapi.testclient import TestClient

from tests.fixtures.app import model_roots_for
from tunedeck.api.app import create_app
from tunedeck.core.settings import Settings
from tunedeck.storage.factory import open_store
from tunedeck.store.store import JobStore
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import Worker

from ..worker.seeding import TINY_JOB_CONFIG, chat_rows

API = "/api/v1"


def test_upload_train_in_s3_and_download_the_adapter(
    tmp_path: Path, sqlite_url: str, s3_store_url: str, s3_server: str, tiny_llama_dir: Path
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data", database_url=sqlite_url, storage_url=s3_store_url, s3_endpoint_url=s3_server,
        model_roots=model_roots_for(tmp_path),
    )
    store = JobStore.open(sqlite_url)
    admin = store.users.create_user("owner")
    token, _ = store.users.issue_token(admin, "e2e")
    headers = {"Authorization": f"Bearer {token}"}
    client = TestClient(create_app(settings, job_store=store))

    worker = Worker(
        WorkerContext(
            worker_id="e2e-worker",
            store=store,
            artifacts=open_store(s3_store_url, s3_endpoint_url=s3_server),
            runs_dir=tmp_path / "runs",
            heartbeat_s=0.5,
            poll_s=0.1,
        )
    )
    body = "".join(json.dumps(row) + "\n" for row in chat_rows(12)).encode()
    upload = client.post(f"{API}/datasets", headers=headers, files={"file": ("train.jsonl", body)}, data={"name": "t"})
    assert upload.status_code == 202, upload.text
    # The worker ingests the upload (it waits in the S3 bucket meanwhile), then trains on it.
    ingestion = upload.json()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and ingestion["state"] not in ("succeeded", "failed", "cancelled"):
        worker.run_once()
        time.sleep(0.3)
        ingestion = client.get(f"{API}/work/{ingestion['id']}", headers=headers).json()
    assert ingestion["state"] == "succeeded", ingestion
    model = client.post(f"{API}/base-models", headers=headers, json={"local_path": str(tiny_llama_dir)})
    assert model.status_code == 201, model.text
    config = {**TINY_JOB_CONFIG, "save_steps": 3}
    created = client.post(
        f"{API}/jobs",
        headers=headers,
        json={
            "name": "e2e",
            "base_model_id": model.json()["id"],
            "train_dataset_id": ingestion["result"]["dataset_id"],
            "config": config,
        },
    )
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]

    deadline = time.monotonic() + 300
    state = "queued"
    while time.monotonic() < deadline and state not in ("succeeded", "failed", "cancelled"):
        worker.run_once()
        time.sleep(0.3)
        state = client.get(f"{API}/jobs/{job_id}", headers=headers).json()["state"]
    assert state == "succeeded", client.get(f"{API}/jobs/{job_id}", headers=headers).json()

    # 12 rows, batch 2: 6 steps, checkpoints at 3 and 6, both committed in the S3 bucket.
    checkpoints = client.get(f"{API}/jobs/{job_id}/checkpoints", headers=headers).json()
    listed = checkpoints["items"] if isinstance(checkpoints, dict) else checkpoints
    assert sorted(c["step"] for c in listed if c["state"] == "committed") == [3, 6]
    archive = client.get(f"{API}/jobs/{job_id}/checkpoints/3/archive", headers=headers)
    assert archive.status_code == 200
    assert "trainer_state.json" in zipfile.ZipFile(io.BytesIO(archive.content)).namelist()

    final = client.get(f"{API}/jobs/{job_id}/final/archive", headers=headers)
    assert final.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(final.content)).namelist()
    assert "adapter_model.safetensors" in names and "adapter_config.json" in names

    loss = client.get(f"{API}/jobs/{job_id}/metrics/loss", headers=headers).json()
    assert len(loss["points"]) == 6
