"""Encryption at rest, against each backend: a local folder and a real S3-compatible server on loopback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tunedeck.core.errors import StorageError
from tunedeck.core.settings import Settings
from tunedeck.storage.base import MANIFEST_NAME, ArtifactStore, checkpoint_prefix
from tunedeck.storage.encryption import EncryptionError, Keyring
from tunedeck.storage.factory import open_store, open_store_from_settings
from tunedeck.storage.key_file import generate_key_line, write_key_file_line
from tunedeck.storage.key_rotation import PLAINTEXT, key_usage, rotate_keys
from tunedeck.storage.s3 import ServerSideEncryption

MIB = 1024 * 1024
CHUNK = 64 * 1024  # small chunks: many per file, without big files
MARKER = b"PLAINTEXT-MARKER-7f3a"
PREFIX = checkpoint_prefix("u1", "job1", 100)


def _keyring(*ids: str) -> Keyring:
    return Keyring.parse("\n".join(generate_key_line(i) for i in ids), source="test keys")


@pytest.fixture(params=["local", "s3"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens the same backend location with a given keyring (and S3 server-side encryption)."""
    if request.param == "local":
        url, endpoint = (tmp_path / "artifacts").as_uri(), None
    else:
        url, endpoint = request.getfixturevalue("s3_store_url"), request.getfixturevalue("s3_server")

    def open_with(keyring: Keyring | None, sse: ServerSideEncryption | None = None) -> ArtifactStore:
        store = open_store(url, s3_endpoint_url=endpoint, multipart_threshold=5 * MIB, keyring=keyring, sse=sse)
        store.chunk_size = CHUNK  # type: ignore[attr-defined]
        return store

    return open_with


def _checkpoint_dir(root: Path, *, weights_bytes: int = 3 * CHUNK + 123) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "adapter_model.safetensors").write_bytes(MARKER + os.urandom(weights_bytes) + MARKER)
    (root / "trainer_state.json").write_bytes(b'{"note": "' + MARKER + b'"}')
    (root / "sub" / "exact_chunk.bin").write_bytes(MARKER + b"\x00" * (CHUNK - len(MARKER)))
    (root / "sub" / "empty.bin").write_bytes(b"")
    return root


def _raw_objects(store: ArtifactStore) -> dict[str, bytes]:
    """Every object exactly as stored, read behind the store's back."""
    if hasattr(store, "root"):
        return {key: (Path(store.root) / key).read_bytes() for key in store.list("")}
    client: Any = store.client  # type: ignore[attr-defined]
    full = {key: f"{store.prefix}/{key}" for key in store.list("")}  # type: ignore[attr-defined]
    return {key: client.get_object(Bucket=store.bucket, Key=name)["Body"].read() for key, name in full.items()}  # type: ignore[attr-defined]


def _tamper(store: ArtifactStore, key: str) -> None:
    """Flip one byte in the middle of the stored ciphertext, keeping everything else (S3 metadata too)."""
    if hasattr(store, "root"):
        path = Path(store.root) / key
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        return
    client: Any = store.client  # type: ignore[attr-defined]
    full = f"{store.prefix}/{key}"  # type: ignore[attr-defined]
    response = client.get_object(Bucket=store.bucket, Key=full)  # type: ignore[attr-defined]
    data = bytearray(response["Body"].read())
    data[len(data) // 2] ^= 0x01
    client.put_object(Bucket=store.bucket, Key=full, Body=bytes(data), Metadata=response["Metadata"])  # type: ignore[attr-defined]


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_encrypted_commit_download_and_verify_round_trip(opener: Any, tmp_path: Path) -> None:
    store = opener(_keyring("k1"))
    source = _checkpoint_dir(tmp_path / "ckpt", weights_bytes=5 * MIB + 123)  # S3: a streamed multipart upload
    manifest = store.commit_directory(source, PREFIX)
    store.put_bytes("users/u1/report.json", b"report " + MARKER)
    assert store.verify(PREFIX)
    assert store.read_manifest(PREFIX) == manifest
    info = store.stat(f"{PREFIX}/adapter_model.safetensors")
    entry = manifest.entry("adapter_model.safetensors")
    assert info is not None and entry is not None and (info.size, info.sha256) == (entry.size, entry.sha256)
    assert store.read_bytes("users/u1/report.json") == b"report " + MARKER
    assert store.presigned_url(f"{PREFIX}/trainer_state.json") is None
    assert store.usage_bytes("users/u1") > manifest.total_bytes  # stored sizes: header/tags included
    dest = tmp_path / "back"
    store.download_directory(PREFIX, dest)
    assert {k: v for k, v in _tree(dest).items() if k != MANIFEST_NAME} == _tree(source)
    assert store.get_file(f"{PREFIX}/sub/empty.bin", tmp_path / "empty").read_bytes() == b""
    # Again with the same content: a repair that finds every file intact uploads nothing new.
    assert store.commit_directory(source, PREFIX) == manifest
    if not hasattr(store, "root"):  # streamed in parts, never read whole into memory
        head = store.client.head_object(Bucket=store.bucket, Key=f"{store.prefix}/{PREFIX}/adapter_model.safetensors")
        assert "-" in head["ETag"]
    raw = _raw_objects(store)
    assert len(raw) == 6 and all(MARKER not in data and b"adapter_model" not in data for data in raw.values())


def test_damaged_ciphertext_is_refused_never_returned(opener: Any, tmp_path: Path) -> None:
    store = opener(_keyring("k1"))
    store.commit_directory(_checkpoint_dir(tmp_path / "ckpt"), PREFIX)
    key = f"{PREFIX}/adapter_model.safetensors"
    _tamper(store, key)
    with pytest.raises(EncryptionError, match=f"{key}: encrypted object fails authentication"):
        store.get_file(key, tmp_path / "out.bin")
    assert not (tmp_path / "out.bin").exists()
    with pytest.raises(EncryptionError, match="fails authentication"):
        store.download_directory(PREFIX, tmp_path / "back")
    assert not (tmp_path / "back").exists()
    if hasattr(store, "root"):  # the local store authenticates every byte in stat(); S3 verifies by HEAD only
        assert not store.verify(PREFIX)


def test_keys_missing_or_absent_give_clear_errors(opener: Any, tmp_path: Path) -> None:
    opener(_keyring("k1")).put_bytes("a/secret.txt", MARKER)
    with pytest.raises(EncryptionError, match="no encryption key is configured; set TUNEDECK_ENCRYPTION_KEY_FILE"):
        opener(None).read_bytes("a/secret.txt")
    with pytest.raises(EncryptionError, match="no encryption key is configured"):
        opener(None).get_file("a/secret.txt", tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()
    with pytest.raises(EncryptionError, match="encrypted with key 'k1', which is not in the keyring"):
        opener(_keyring("other")).read_bytes("a/secret.txt")
    opener(None).put_bytes("a/plain.txt", MARKER)
    with pytest.raises(EncryptionError, match=r"a/plain\.txt: stored unencrypted.*tunedeck keys rotate"):
        opener(_keyring("k1")).read_bytes("a/plain.txt")


def test_rotation_rewraps_then_the_old_key_can_be_dropped(opener: Any, tmp_path: Path) -> None:
    first = _keyring("k1")
    opener(first).commit_directory(_checkpoint_dir(tmp_path / "ckpt"), PREFIX)
    second = _keyring("k2")
    both = Keyring([first.active, second.active])
    rotating = opener(both)
    raw_before = _raw_objects(rotating)
    seen: list[tuple[int, int]] = []
    report = rotate_keys(rotating, both, on_progress=lambda done, total, _key: seen.append((done, total)))
    assert (report.rewrapped, report.encrypted, report.already_current) == (5, 0, 0)
    assert seen[-1] == (5, 5)
    assert key_usage(rotating) == {"k2": 5}
    # Only the envelopes changed: the local files keep their chunks byte for byte after the header.
    if hasattr(rotating, "root"):
        from tunedeck.storage.encryption import HEADER_SIZE

        raw_after = _raw_objects(rotating)
        assert all(raw_after[k][HEADER_SIZE:] == raw_before[k][HEADER_SIZE:] for k in raw_before)
        assert all(raw_after[k][:HEADER_SIZE] != raw_before[k][:HEADER_SIZE] for k in raw_before)
    again = rotate_keys(rotating, both)
    assert (again.rewrapped, again.already_current) == (0, 5)
    new_only = opener(Keyring([second.active]))
    assert new_only.verify(PREFIX)
    new_only.download_directory(PREFIX, tmp_path / "back")
    assert (tmp_path / "back" / "trainer_state.json").read_bytes() == (
        tmp_path / "ckpt" / "trainer_state.json"
    ).read_bytes()


def test_rotation_encrypts_plaintext_objects(opener: Any, tmp_path: Path) -> None:
    opener(None).commit_directory(_checkpoint_dir(tmp_path / "ckpt"), PREFIX)
    keyring = _keyring("k1")
    store = opener(keyring)
    assert key_usage(store) == {PLAINTEXT: 5}
    with pytest.raises(EncryptionError, match="tunedeck keys rotate"):
        store.read_manifest(PREFIX)
    report = rotate_keys(store, keyring)
    assert (report.rewrapped, report.encrypted, report.already_current) == (0, 5, 0)
    assert store.verify(PREFIX)
    assert all(MARKER not in data for data in _raw_objects(store).values())


def test_s3_server_side_encryption_on_every_write(s3_server: str, s3_store_url: str, tmp_path: Path) -> None:
    old, new = _keyring("k1"), _keyring("k2")
    sse = ServerSideEncryption("AES256")

    def open_with(keyring: Keyring | None) -> Any:
        return open_store(
            s3_store_url, s3_endpoint_url=s3_server, multipart_threshold=5 * MIB, keyring=keyring, sse=sse
        )

    open_with(old).commit_directory(_checkpoint_dir(tmp_path / "ckpt"), PREFIX)
    open_with(None).put_bytes("users/u1/plain.json", b"{}")
    store = open_with(old)
    store.put_bytes("users/u1/report.json", b"{}")

    def sse_of_every_object() -> dict[str, str | None]:
        return {
            key: store.client.head_object(Bucket=store.bucket, Key=f"{store.prefix}/{key}").get("ServerSideEncryption")
            for key in store.list("")
        }

    assert set(sse_of_every_object().values()) == {"AES256"}
    both = Keyring([old.active, new.active])
    rotate_keys(open_with(both), both)  # copies (re-wrap) and rewrites (plaintext) keep the encryption
    assert set(sse_of_every_object().values()) == {"AES256"} and f"{PREFIX}/{MANIFEST_NAME}" in sse_of_every_object()


def test_server_side_encryption_settings_are_checked() -> None:
    assert ServerSideEncryption("aws:kms", "alias/tunedeck").request_args() == {
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "alias/tunedeck",
    }
    with pytest.raises(StorageError, match=r"TUNEDECK_S3_SSE='aes'.*AES256, aws:kms"):
        ServerSideEncryption("aes")
    with pytest.raises(StorageError, match="only used with TUNEDECK_S3_SSE=aws:kms"):
        ServerSideEncryption("AES256", "alias/x")
    with pytest.raises(StorageError, match="TUNEDECK_S3_SSE_KMS_KEY_ID is set but TUNEDECK_S3_SSE is not"):
        ServerSideEncryption.from_settings(Settings(s3_sse_kms_key_id="alias/x"))  # type: ignore[call-arg]


def test_open_store_from_settings_encrypts_with_the_key_file(tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    write_key_file_line(key_file, generate_key_line("k1"))
    settings = Settings(data_dir=tmp_path / "data", encryption_key_file=key_file)  # type: ignore[call-arg]
    store = open_store_from_settings(settings)
    store.put_bytes("a/b.txt", MARKER)
    assert MARKER not in (tmp_path / "data" / "artifacts" / "a" / "b.txt").read_bytes()
    assert store.read_bytes("a/b.txt") == MARKER
    with pytest.raises(StorageError, match=r"TUNEDECK_S3_SSE is set but the storage .* is not an S3 bucket"):
        open_store_from_settings(Settings(data_dir=tmp_path / "data", s3_sse="AES256"))  # type: ignore[call-arg]
