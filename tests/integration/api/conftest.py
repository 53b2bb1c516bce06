"""An API app on a migrated SQLite database and a local artifact folder, with two plain users."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tunedeck.api.app import create_app
from tunedeck.core.settings import Settings
from tunedeck.jobs.store import JobStore
from tunedeck.storage.base import ArtifactStore, checkpoint_prefix
from tunedeck.storage.factory import open_store

API = "/api/v1"
MAX_UPLOAD_BYTES = 64 * 1024
MAX_UPLOAD_ROWS = 50


@dataclass
class ApiHarness:
    """A running app and what a test needs to drive it."""

    client: TestClient
    store: JobStore
    artifacts: ArtifactStore
    settings: Settings
    tokens: dict[str, str]
    users: dict[str, Any]

    def auth(self, user: str) -> dict[str, str]:
        """Headers that sign in as `user`."""
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    def upload(self, user: str, content: bytes, filename: str = "train.jsonl", **fields: str) -> Any:
        """POST a dataset file as `user`."""
        return self.client.post(
            f"{API}/datasets", headers=self.auth(user), files={"file": (filename, content)}, data=fields
        )

    def dataset(self, user: str, rows: int = 3, name: str = "train") -> dict[str, Any]:
        """A valid dataset owned by `user`."""
        response = self.upload(user, jsonl_rows(rows), name=name)
        assert response.status_code == 201, response.text
        return response.json()

    def base_model(self, user: str) -> dict[str, Any]:
        """A hub base model registered by `user`."""
        response = self.client.post(
            f"{API}/base-models", headers=self.auth(user), json={"hub_id": "org/tiny-model", "revision": "main"}
        )
        assert response.status_code == 201, response.text
        return response.json()

    def job(self, user: str, name: str = "job", **config: Any) -> dict[str, Any]:
        """A queued job of `user` (its own dataset and base model)."""
        dataset = self.dataset(user, name=f"data-{name}")
        model = self.base_model(user)
        body = {
            "name": name,
            "base_model_id": model["id"],
            "train_dataset_id": dataset["id"],
            "config": {"epochs": 1, **config},
        }
        response = self.client.post(f"{API}/jobs", headers=self.auth(user), json=body)
        assert response.status_code == 201, response.text
        return response.json()

    def commit_checkpoint(self, job_id: str, step: int, tmp: Path, files: dict[str, bytes]) -> str:
        """Claim the job and commit a checkpoint as a worker would; returns the fencing token."""
        claimed = self.store.queue.claim("test-worker", devices=0, lease_s=60)
        assert claimed is not None and claimed.job_id == job_id
        folder = tmp / f"ckpt-{step}"
        for relative, data in files.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_bytes(data)
        prefix = checkpoint_prefix(claimed.owner_id, job_id, step)
        assert self.store.checkpoints.record_written(job_id, claimed.fencing_token, step, prefix)
        manifest = self.artifacts.commit_directory(folder, prefix)
        assert self.store.checkpoints.mark_committed(job_id, claimed.fencing_token, step, manifest.digest)
        return claimed.fencing_token


def jsonl_rows(count: int, start: int = 0) -> bytes:
    """`count` distinct valid prompt/completion rows."""
    lines = [
        json.dumps({"prompt": f"Question {i}: what is {i} plus {i}?", "completion": f"It is {2 * i}."})
        for i in range(start, start + count)
    ]
    return ("\n".join(lines) + "\n").encode()


def make_settings(tmp_path: Path, database_url: str, storage_url: str | None = None) -> Settings:
    """Settings for a test app: everything under `tmp_path`, small limits."""
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        storage_url=storage_url or (tmp_path / "artifacts").resolve().as_uri(),
        max_upload_bytes=MAX_UPLOAD_BYTES,
        max_upload_rows=MAX_UPLOAD_ROWS,
    )


def start_harness(settings: Settings, artifacts: ArtifactStore | None = None) -> Iterator[ApiHarness]:
    """Create two plain users and an admin, build the app, and yield a harness around it."""
    store = JobStore.open(settings.resolved_database_url(), migrate=False)
    artifacts = artifacts or open_store(settings.resolved_storage_url(), s3_endpoint_url=settings.s3_endpoint_url)
    tokens: dict[str, str] = {}
    users: dict[str, Any] = {}
    for name, admin in (("alice", False), ("bob", False), ("root", True)):
        users[name] = store.users.create_user(name, admin=admin)
        tokens[name], _ = store.users.issue_token(users[name])
    app = create_app(settings, store=artifacts, job_store=store)
    app.state.tunedeck.stream_poll_seconds = 0.02
    try:
        with TestClient(app) as client:
            yield ApiHarness(client, store, artifacts, settings, tokens, users)
    finally:
        store.close()


@pytest.fixture
def api(tmp_path: Path, sqlite_url: str) -> Iterator[ApiHarness]:
    """The API on SQLite and a local artifact folder."""
    yield from start_harness(make_settings(tmp_path, sqlite_url))
