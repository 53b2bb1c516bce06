"""Checkpoint listing and downloads: zip archives, single files, and presigned redirects on S3."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.app import API, AppHarness, make_settings, start_harness
from tests.fixtures.job_claims import claim_job
from tunedeck.storage.base import checkpoint_prefix, final_prefix
from tunedeck.storage.factory import open_store

FILES = {"adapter_model.safetensors": b"\x00weights" * 1000, "optimizer/state.json": b'{"step": 20}'}


def test_committed_checkpoint_downloads_as_a_verified_zip(api: AppHarness, tmp_path: Path) -> None:
    job = api.job("alice")
    api.commit_checkpoint(job["id"], 20, tmp_path, FILES)
    base = f"{API}/jobs/{job['id']}/checkpoints"
    listed = api.client.get(base, headers=api.auth("alice")).json()
    assert [(c["step"], c["committed"]) for c in listed] == [(20, True)]
    detail = api.client.get(f"{base}/20", headers=api.auth("alice")).json()
    assert sorted(f["path"] for f in detail["files"]) == sorted(FILES)

    response = api.client.get(f"{base}/20/archive", headers=api.auth("alice"))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert archive.testzip() is None
    assert {name: archive.read(name) for name in FILES} == FILES
    assert "MANIFEST.json" in archive.namelist()

    one = api.client.get(f"{base}/20/files/optimizer/state.json", headers=api.auth("alice"))
    assert one.status_code == 200 and one.content == FILES["optimizer/state.json"]
    # A browser must never guess a download's type (a file rendered as HTML would run in tunedeck's origin).
    for download in (response, one):
        assert download.headers["x-content-type-options"] == "nosniff"
    # Only manifest paths are served; local storage has no presigned URLs, so redirect falls back to bytes.
    assert api.client.get(f"{base}/20/files/..%2F..%2Fx", headers=api.auth("alice")).status_code == 404
    assert api.client.get(f"{base}/20/files/nothing.bin", headers=api.auth("alice")).status_code == 404
    local = api.client.get(f"{base}/20/files/adapter_model.safetensors?redirect=true", headers=api.auth("alice"))
    assert local.status_code == 200 and local.content == FILES["adapter_model.safetensors"]
    scratch = api.settings.data_dir / "scratch"
    assert not scratch.exists() or list(scratch.iterdir()) == []  # downloaded copies are cleaned up


def test_written_but_uncommitted_checkpoint_is_not_downloadable(api: AppHarness) -> None:
    job = api.job("alice")
    claimed = claim_job(api.store, "w", devices=0, lease_s=60)
    assert claimed is not None
    api.store.checkpoints.record_written(job["id"], claimed.fencing_token, 5, "users/x/jobs/y/checkpoints/5")
    base = f"{API}/jobs/{job['id']}/checkpoints"
    assert api.client.get(base, headers=api.auth("alice")).json()[0]["committed"] is False
    assert api.client.get(f"{base}/5/archive", headers=api.auth("alice")).status_code == 404
    assert api.client.get(f"{base}/6/archive", headers=api.auth("alice")).status_code == 404


def test_damaged_checkpoint_fails_before_any_byte_is_sent(api: AppHarness, tmp_path: Path) -> None:
    job = api.job("alice")
    api.commit_checkpoint(job["id"], 3, tmp_path, FILES)
    key = next(k for k in api.artifacts.list("") if k.endswith("adapter_model.safetensors"))
    api.artifacts.put_bytes(key, b"tampered")
    response = api.client.get(f"{API}/jobs/{job['id']}/checkpoints/3/archive", headers=api.auth("alice"))
    assert response.status_code == 503
    assert "zip" not in response.headers["content-type"]


def test_final_model_downloads(api: AppHarness, tmp_path: Path) -> None:
    job = api.job("alice")
    base = f"{API}/jobs/{job['id']}/final"
    assert api.client.get(base, headers=api.auth("alice")).status_code == 404
    folder = tmp_path / "final"
    folder.mkdir()
    (folder / "adapter_config.json").write_text('{"r": 8}')
    api.artifacts.commit_directory(folder, final_prefix(api.users["alice"].id, job["id"]))
    assert [f["path"] for f in api.client.get(base, headers=api.auth("alice")).json()] == ["adapter_config.json"]
    archive = zipfile.ZipFile(io.BytesIO(api.client.get(f"{base}/archive", headers=api.auth("alice")).content))
    assert archive.read("adapter_config.json") == b'{"r": 8}'


@pytest.fixture
def s3_api(tmp_path: Path, sqlite_url: str, s3_server: str, s3_store_url: str) -> Iterator[AppHarness]:
    """The API with artifacts in a bucket of the loopback S3 server."""
    settings = make_settings(tmp_path, sqlite_url, s3_store_url).model_copy(update={"s3_endpoint_url": s3_server})
    yield from start_harness(settings, open_store(s3_store_url, s3_endpoint_url=s3_server))


def test_s3_checkpoint_file_redirects_to_a_presigned_url(s3_api: AppHarness, tmp_path: Path) -> None:
    job = s3_api.job("alice")
    s3_api.commit_checkpoint(job["id"], 40, tmp_path, FILES)
    url = f"{API}/jobs/{job['id']}/checkpoints/40/files/adapter_model.safetensors"
    response = s3_api.client.get(url, headers=s3_api.auth("alice"), params={"redirect": "true"}, follow_redirects=False)
    assert response.status_code == 307
    location = response.headers["location"]
    assert location.startswith("http://127.0.0.1")
    assert "Expires=" in location  # short-lived: 5 minutes
    assert httpx.get(location).content == FILES["adapter_model.safetensors"]
    archive = s3_api.client.get(f"{API}/jobs/{job['id']}/checkpoints/40/archive", headers=s3_api.auth("alice"))
    assert zipfile.ZipFile(io.BytesIO(archive.content)).read("optimizer/state.json") == FILES["optimizer/state.json"]


def test_encrypted_s3_checkpoint_file_streams_through_the_server(
    tmp_path: Path, sqlite_url: str, s3_server: str, s3_store_url: str
) -> None:
    from pydantic import SecretStr

    from tunedeck.storage.encryption import EncryptionError
    from tunedeck.storage.key_file import generate_key_line

    keys = SecretStr(generate_key_line("k1"))
    settings = make_settings(tmp_path, sqlite_url, s3_store_url).model_copy(
        update={"s3_endpoint_url": s3_server, "encryption_keys": keys}
    )
    for harness in start_harness(settings):  # the store opened from these settings: encrypted
        job = harness.job("alice")
        harness.commit_checkpoint(job["id"], 40, tmp_path, FILES)
        prefix = checkpoint_prefix(harness.users["alice"].id, job["id"], 40)
        url = f"{API}/jobs/{job['id']}/checkpoints/40/files/adapter_model.safetensors"
        # No presigned URL: S3 holds only ciphertext, so the server decrypts and streams the file.
        response = harness.client.get(url, headers=harness.auth("alice"), params={"redirect": "true"})
        assert response.status_code == 200 and response.content == FILES["adapter_model.safetensors"]
        raw = open_store(s3_store_url, s3_endpoint_url=s3_server)
        with pytest.raises(EncryptionError, match="no encryption key is configured"):
            raw.read_bytes(f"{prefix}/adapter_model.safetensors")
