"""One contract for every artifact store: a local folder and a real S3-compatible server on loopback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tunedeck.core.errors import NotFoundError, StorageError
from tunedeck.storage.base import MANIFEST_NAME, ArtifactStore, checkpoint_prefix, job_prefix
from tunedeck.storage.factory import open_store

MIB = 1024 * 1024


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    """The same contract against each backend; S3 splits files of 5 MiB or more into parts."""
    if request.param == "local":
        return open_store((tmp_path / "artifacts").as_uri())
    url = request.getfixturevalue("s3_store_url")
    endpoint = request.getfixturevalue("s3_server")
    return open_store(url, s3_endpoint_url=endpoint, multipart_threshold=5 * MIB)


def _checkpoint_dir(root: Path, *, seed: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "adapter_model.safetensors").write_bytes(bytes([seed % 256]) * 4096 + os.urandom(1024))
    (root / "trainer_state.json").write_text(json.dumps({"step": 10, "seed": seed}))
    (root / "optimizer").mkdir(exist_ok=True)
    (root / "optimizer" / "state.bin").write_bytes(os.urandom(2048))
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _corrupt(store: ArtifactStore, key: str, data: bytes) -> None:
    """Overwrite an object behind the store's back, as disk damage or a stray writer would."""
    if hasattr(store, "root"):
        (Path(store.root) / key).write_bytes(data)
    else:
        full = f"{store.prefix}/{key}"  # type: ignore[attr-defined]
        store.client.put_object(Bucket=store.bucket, Key=full, Body=data)  # type: ignore[attr-defined]


def test_bytes_round_trip_list_and_delete(store: ArtifactStore, tmp_path: Path) -> None:
    store.put_bytes("a/b/one.txt", b"one")
    store.put_bytes("a/b/two.txt", b"two")
    store.put_bytes("a/c.txt", b"c")
    store.put_bytes("ab/other.txt", b"not under a/")
    assert store.read_bytes("a/b/one.txt") == b"one"
    assert store.exists("a/c.txt") and not store.exists("a/missing.txt")
    assert store.list("a") == ["a/b/one.txt", "a/b/two.txt", "a/c.txt"]
    assert store.list("a/b/") == ["a/b/one.txt", "a/b/two.txt"]
    assert store.delete_prefix("a/b") == 2
    assert store.list("a") == ["a/c.txt"]
    assert store.list("") == ["a/c.txt", "ab/other.txt"]
    with pytest.raises(NotFoundError):
        store.read_bytes("a/b/one.txt")
    with pytest.raises(NotFoundError):
        store.get_file("nope/missing.bin", tmp_path / "x")


@pytest.mark.parametrize("key", ["../escape", "a/../../b", "/etc/passwd", "a//b", ".staging/x", "a\\b"])
def test_unsafe_keys_are_refused(store: ArtifactStore, key: str) -> None:
    with pytest.raises(StorageError):
        store.put_bytes(key, b"x")


def test_empty_prefix_delete_is_refused(store: ArtifactStore) -> None:
    store.put_bytes("keep/me.txt", b"x")
    with pytest.raises(StorageError):
        store.delete_prefix("")
    assert store.exists("keep/me.txt")


def test_commit_writes_manifest_and_round_trips(store: ArtifactStore, tmp_path: Path) -> None:
    source = _checkpoint_dir(tmp_path / "checkpoint-10")
    prefix = checkpoint_prefix("usr1", "job1", 10)
    manifest = store.commit_directory(source, prefix)
    assert [f.path for f in manifest.files] == [
        "adapter_model.safetensors",
        "optimizer/state.bin",
        "trainer_state.json",
    ]
    assert store.verify(prefix)
    assert store.read_manifest(prefix) == manifest
    assert f"{prefix}/{MANIFEST_NAME}" in store.list(job_prefix("usr1", "job1"))

    dest = tmp_path / "restored" / "checkpoint-10"
    assert store.download_directory(prefix, dest) == manifest
    restored = _tree(dest)
    assert restored.pop(MANIFEST_NAME) == manifest.to_json()
    assert restored == _tree(source)

    single = store.get_file(f"{prefix}/optimizer/state.bin", tmp_path / "state.bin")
    assert single.read_bytes() == (source / "optimizer" / "state.bin").read_bytes()


def test_multipart_upload_round_trips(store: ArtifactStore, tmp_path: Path) -> None:
    source = tmp_path / "big"
    source.mkdir()
    payload = os.urandom(1024) * (11 * 1024)  # 11 MiB: three parts at 5 MiB
    (source / "model.safetensors").write_bytes(payload)
    prefix = checkpoint_prefix("usr1", "job1", 20)
    store.commit_directory(source, prefix)
    assert store.verify(prefix)
    if hasattr(store, "client"):
        head = store.client.head_object(  # type: ignore[attr-defined]
            Bucket=store.bucket,
            Key=f"{store.prefix}/{prefix}/model.safetensors",  # type: ignore[attr-defined]
        )
        assert head["ETag"].strip('"').endswith("-3"), "expected a three-part multipart upload"
    dest = store.get_file(f"{prefix}/model.safetensors", tmp_path / "out.safetensors")
    assert dest.read_bytes() == payload


def test_partial_upload_without_manifest_does_not_verify(store: ArtifactStore, tmp_path: Path) -> None:
    source = _checkpoint_dir(tmp_path / "ckpt")
    prefix = checkpoint_prefix("usr1", "job1", 30)
    # A crash mid-commit: some files stored, the manifest never written.
    store.put_file(f"{prefix}/adapter_model.safetensors", source / "adapter_model.safetensors")
    assert not store.verify(prefix)
    assert store.read_manifest(prefix) is None
    with pytest.raises(StorageError):
        store.download_directory(prefix, tmp_path / "dest")
    assert not (tmp_path / "dest").exists()
    # The retry after the crash completes the commit.
    store.commit_directory(source, prefix)
    assert store.verify(prefix)


def test_corrupted_object_fails_verify_and_download(store: ArtifactStore, tmp_path: Path) -> None:
    source = _checkpoint_dir(tmp_path / "ckpt")
    prefix = checkpoint_prefix("usr1", "job1", 40)
    store.commit_directory(source, prefix)
    original = (source / "trainer_state.json").read_bytes()
    _corrupt(store, f"{prefix}/trainer_state.json", original.replace(b"10", b"11"))  # same size

    assert not store.verify(prefix)
    dest = tmp_path / "restore"
    with pytest.raises(StorageError, match="checksum mismatch"):
        store.download_directory(prefix, dest)
    assert not dest.exists(), "a refused download must leave nothing behind"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".restore")] == []
    with pytest.raises(StorageError, match="checksum mismatch"):
        store.get_file(f"{prefix}/trainer_state.json", tmp_path / "single.json")
    assert not (tmp_path / "single.json").exists()


def test_commit_repairs_damage_when_identical(store: ArtifactStore, tmp_path: Path) -> None:
    source = _checkpoint_dir(tmp_path / "ckpt")
    prefix = checkpoint_prefix("usr1", "job1", 45)
    first = store.commit_directory(source, prefix)
    _corrupt(store, f"{prefix}/optimizer/state.bin", b"damaged")
    assert not store.verify(prefix)
    assert store.commit_directory(source, prefix) == first
    assert store.verify(prefix)


def test_committed_keys_are_immutable(store: ArtifactStore, tmp_path: Path) -> None:
    source = _checkpoint_dir(tmp_path / "ckpt", seed=1)
    prefix = checkpoint_prefix("usr1", "job1", 50)
    first = store.commit_directory(source, prefix)
    assert store.commit_directory(source, prefix) == first  # identical: idempotent

    changed = _checkpoint_dir(tmp_path / "other", seed=2)
    with pytest.raises(StorageError, match="immutable"):
        store.commit_directory(changed, prefix)
    assert store.read_manifest(prefix) == first
    assert store.verify(prefix)


def test_download_replaces_an_older_local_copy(store: ArtifactStore, tmp_path: Path) -> None:
    source = _checkpoint_dir(tmp_path / "ckpt")
    prefix = checkpoint_prefix("usr1", "job1", 60)
    store.commit_directory(source, prefix)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "stale.bin").write_bytes(b"from an earlier attempt")
    store.download_directory(prefix, dest)
    assert not (dest / "stale.bin").exists()
    assert (dest / "trainer_state.json").read_bytes() == (source / "trainer_state.json").read_bytes()


def test_commit_and_download_report_their_bytes_file_by_file(store: ArtifactStore, tmp_path: Path) -> None:
    source = _checkpoint_dir(tmp_path / "ckpt")
    prefix = checkpoint_prefix("usr1", "job1", 65)
    committed: list[tuple[int, int]] = []
    manifest = store.commit_directory(source, prefix, on_progress=lambda done, total: committed.append((done, total)))
    sizes = [entry.size for entry in manifest.files]
    expected = [(sum(sizes[:count]), manifest.total_bytes) for count in range(len(sizes) + 1)]
    assert committed == expected  # once before the first file, then after each, ending at the total
    fetched: list[tuple[int, int]] = []
    store.download_directory(prefix, tmp_path / "dest", on_progress=lambda done, total: fetched.append((done, total)))
    assert fetched == expected
    _corrupt(store, f"{prefix}/optimizer/state.bin", b"damaged")
    repaired: list[tuple[int, int]] = []
    store.commit_directory(source, prefix, on_progress=lambda done, total: repaired.append((done, total)))
    assert repaired == expected  # files already stored count as done: the bar still ends full


def test_a_progress_hook_that_raises_ends_the_commit_before_its_manifest(store: ArtifactStore, tmp_path: Path) -> None:
    prefix = checkpoint_prefix("usr1", "job1", 66)

    def refuse(done: int, total: int) -> None:
        if done:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        store.commit_directory(_checkpoint_dir(tmp_path / "ckpt"), prefix, on_progress=refuse)
    assert store.read_manifest(prefix) is None


def test_presigned_url_only_on_s3(store: ArtifactStore) -> None:
    store.put_bytes("x/file.txt", b"hello")
    url = store.presigned_url("x/file.txt", expires_s=60)
    if hasattr(store, "client"):
        assert url is not None and "x/file.txt" in url
        assert "X-Amz-Expires=60" in url or "Expires=" in url
    else:
        assert url is None


def test_commit_refuses_links_outside_the_directory(store: ArtifactStore, tmp_path: Path) -> None:
    source = tmp_path / "ckpt"
    source.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    (source / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(StorageError, match="outside"):
        store.commit_directory(source, checkpoint_prefix("usr1", "job1", 70))


def test_usage_bytes_sums_the_folder_and_only_it(store: ArtifactStore, tmp_path: Path) -> None:
    store.put_bytes("users/u1/datasets/a.jsonl", b"x" * 10)
    store.put_bytes("users/u1/jobs/j/final/w.bin", b"y" * 32)
    store.put_bytes("users/u10/other.bin", b"z" * 1000)  # a sibling whose name starts the same
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "w.safetensors").write_bytes(b"w" * 100)
    manifest = store.commit_directory(folder, "users/u1/jobs/j/checkpoints/step-1")
    expected = 10 + 32 + 100 + len(manifest.to_json())  # the manifest is stored, so it counts
    assert store.usage_bytes("users/u1") == expected
    assert store.usage_bytes("users/nobody") == 0
    store.delete_prefix("users/u1/jobs")
    assert store.usage_bytes("users/u1") == 10
