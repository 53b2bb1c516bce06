"""Local-folder specifics, key layout and URL parsing (the shared behaviour is in tests/contract)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import (
    MANIFEST_NAME,
    Manifest,
    ManifestEntry,
    ObjectInfo,
    checkpoint_prefix,
    dataset_prefix,
    final_prefix,
    job_prefix,
    validate_key,
)
from tunedeck.storage.factory import open_store
from tunedeck.storage.local import LocalArtifactStore
from tunedeck.storage.s3 import S3ArtifactStore


def test_a_symlink_inside_the_store_cannot_lead_outside(tmp_path: Path) -> None:
    root = tmp_path / "store"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    root.mkdir()
    (root / "users").symlink_to(outside)
    store = LocalArtifactStore(root)
    with pytest.raises(StorageError, match="outside the store"):
        store.read_bytes("users/secret.txt")
    with pytest.raises(StorageError, match="outside the store"):
        store.put_bytes("users/new.txt", b"x")
    assert not (outside / "new.txt").exists()


def test_writes_leave_no_temp_files_and_construction_creates_nothing(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "store")
    assert not (tmp_path / "store").exists()
    store.put_bytes("a/b.txt", b"hello")
    assert store.list() == ["a/b.txt"]
    assert list((tmp_path / "store" / ".staging").iterdir()) == []


def test_key_layout_is_per_user_and_job() -> None:
    assert job_prefix("usr_1", "job_2") == "users/usr_1/jobs/job_2"
    assert checkpoint_prefix("usr_1", "job_2", 120) == "users/usr_1/jobs/job_2/checkpoints/step-0000000120"
    assert final_prefix("usr_1", "job_2") == "users/usr_1/jobs/job_2/final"
    assert dataset_prefix("usr_1", "dsv_3") == "users/usr_1/datasets/dsv_3"
    for bad in ("../x", "a/b", "", "."):
        with pytest.raises(StorageError):
            job_prefix(bad, "job")
    with pytest.raises(StorageError):
        checkpoint_prefix("u", "j", -1)


def test_validate_key_normalises_trailing_slash() -> None:
    assert validate_key("a/b/") == "a/b"
    assert validate_key("/", allow_empty=True) == ""


def test_manifest_round_trip_and_digest_is_canonical() -> None:
    manifest = Manifest(files=(ManifestEntry("a.bin", 3, "0" * 64), ManifestEntry("b/c.json", 5, "1" * 64)))
    again = Manifest.from_json(manifest.to_json())
    assert again == manifest and again.digest == manifest.digest and manifest.total_bytes == 8
    with pytest.raises(StorageError, match="not a valid manifest"):
        Manifest.from_json(b'{"format": "other", "files": []}')
    with pytest.raises(StorageError, match="not a valid manifest"):
        Manifest.from_json(b"not json")


def test_open_store_parses_urls(tmp_path: Path) -> None:
    local = open_store(tmp_path.as_uri())
    assert isinstance(local, LocalArtifactStore) and local.root == tmp_path.resolve()
    s3 = open_store("s3://bucket/some/prefix", s3_endpoint_url="http://127.0.0.1:9", multipart_threshold=5 << 20)
    assert isinstance(s3, S3ArtifactStore)
    assert (s3.bucket, s3.prefix, s3.endpoint_url) == ("bucket", "some/prefix", "http://127.0.0.1:9")
    for bad in ("ftp://x/y", "file://host/path", "s3:///nobucket", "relative/path"):
        with pytest.raises(StorageError):
            open_store(bad)


class _RecordingStore(LocalArtifactStore):
    """A local store that records the order of writes and can fail the n-th file upload."""

    def __init__(self, root: Path, fail_on_upload: int | None = None) -> None:
        super().__init__(root)
        self.writes: list[str] = []
        self.fail_on_upload = fail_on_upload

    def _upload(self, key: str, path: Path, sha256: str) -> ObjectInfo:
        if self.fail_on_upload is not None and len(self.writes) == self.fail_on_upload:
            raise StorageError("connection lost")
        self.writes.append(key)
        return super()._upload(key, path, sha256)

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        self.writes.append(key)
        return super().put_bytes(key, data)


def _three_files(folder: Path) -> Path:
    folder.mkdir()
    for name in ("a.bin", "b.bin", "c.bin"):
        (folder / name).write_bytes(name.encode() * 100)
    return folder


def test_commit_writes_the_manifest_last(tmp_path: Path) -> None:
    store = _RecordingStore(tmp_path / "store")
    store.commit_directory(_three_files(tmp_path / "ckpt"), "p/step-1")
    assert store.writes == ["p/step-1/a.bin", "p/step-1/b.bin", "p/step-1/c.bin", f"p/step-1/{MANIFEST_NAME}"]


def test_a_commit_interrupted_mid_upload_leaves_no_manifest(tmp_path: Path) -> None:
    source = _three_files(tmp_path / "ckpt")
    store = _RecordingStore(tmp_path / "store", fail_on_upload=2)
    with pytest.raises(StorageError, match="connection lost"):
        store.commit_directory(source, "p/step-1")
    assert store.read_manifest("p/step-1") is None and not store.verify("p/step-1")
    store.fail_on_upload = None
    store.commit_directory(source, "p/step-1")
    assert store.verify("p/step-1")
