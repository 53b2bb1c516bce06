"""The checkpoint-commit contract, written once on top of a backend's primitive operations.

Backends (`local`, `s3`) only move bytes; this module decides the order of
operations (files first, manifest last), checks checksums, and keeps downloads
atomic, so both backends behave the same by construction.
"""

from __future__ import annotations

import os
import secrets
import shutil
from abc import ABC, abstractmethod
from pathlib import Path

from tunedeck.core.errors import StorageError
from tunedeck.core.failpoints import failpoint
from tunedeck.storage.base import (
    MANIFEST_NAME,
    Manifest,
    ManifestEntry,
    MissingArtifactError,
    ObjectInfo,
    TransferProgress,
    file_sha256,
    join_key,
    validate_key,
)
from tunedeck.storage.encryption import Envelope, Keyring


class ManifestedStore(ABC):
    """Shared implementation of `ArtifactStore`'s manifest operations.

    Subclasses implement the byte-moving primitives: `_upload`, `_fetch_to`,
    `put_bytes`, `read_bytes`, `stat`, `exists`, `list`, `delete_prefix`, `presigned_url`,
    and the three that key rotation needs. A store with a `keyring` encrypts in its
    primitives: `stat` reports the plaintext's size and sha256, so everything here (manifests
    included) works the same on encrypted objects.
    """

    keyring: Keyring | None = None

    # -- primitives --------------------------------------------------------------

    @abstractmethod
    def _upload(self, key: str, path: Path, sha256: str) -> ObjectInfo:
        """Store the file at `key`, recording `sha256` (already computed by the caller)."""

    @abstractmethod
    def _fetch_to(self, key: str, target: Path) -> None:
        """Write the raw object at `key` to `target` (which does not exist yet); no checks."""

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store `data` at `key`."""

    @abstractmethod
    def read_bytes(self, key: str) -> bytes:
        """The whole object at `key`; MissingArtifactError when absent."""

    @abstractmethod
    def stat(self, key: str) -> ObjectInfo | None:
        """Size and recorded sha256 of `key`, or None when absent."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """Whether an object is stored at `key`."""

    @abstractmethod
    def list(self, prefix: str = "") -> list[str]:
        """Every key under the folder `prefix`, sorted."""

    @abstractmethod
    def delete_prefix(self, prefix: str) -> int:
        """Delete every key under the folder `prefix`; returns how many."""

    @abstractmethod
    def presigned_url(self, key: str, expires_s: int = 300) -> str | None:
        """A short-lived download URL, or None."""

    @abstractmethod
    def _stored_envelope(self, key: str) -> Envelope | None:
        """The key envelope of the object at `key` as stored (not opened); None for a plaintext object."""

    @abstractmethod
    def _replace_envelope(self, key: str, envelope: Envelope) -> None:
        """Swap the envelope of the encrypted object at `key`, leaving its chunks untouched."""

    @abstractmethod
    def _fetch_raw_to(self, key: str, target: Path) -> None:
        """Write the object at `key` exactly as stored to `target`, decrypting nothing."""

    # -- single objects ----------------------------------------------------------

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        """Upload a local file to `key`, recording its sha256."""
        source = Path(path)
        if not source.is_file():
            raise StorageError(f"cannot upload {source}: not a regular file")
        return self._upload(validate_key(key), source, file_sha256(source))

    def get_file(self, key: str, dest: Path) -> Path:
        """Download `key` to `dest` atomically; verifies size and sha256 when a manifest covers the key."""
        key = validate_key(key)
        expected = None if key.rsplit("/", 1)[-1] == MANIFEST_NAME else self._covering_entry(key)
        target = Path(dest)
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f".{target.name}.part-{secrets.token_hex(6)}")
        try:
            self._fetch_to(key, part)
            if expected is not None:
                _check_file(part, expected, key)
            os.replace(part, target)
        finally:
            part.unlink(missing_ok=True)
        return target

    def _covering_entry(self, key: str) -> ManifestEntry | None:
        """The entry of the nearest manifest above `key` that lists it, if any."""
        parts = key.split("/")
        for depth in range(len(parts) - 1, 0, -1):
            folder = "/".join(parts[:depth])
            manifest = self.read_manifest(folder)
            if manifest is not None:
                return manifest.entry("/".join(parts[depth:]))
        return None

    # -- committed prefixes -------------------------------------------------------

    def read_manifest(self, prefix: str) -> Manifest | None:
        """The manifest of `prefix`, or None when absent; StorageError when unreadable."""
        key = join_key(prefix, MANIFEST_NAME)
        try:
            data = self.read_bytes(key)
        except MissingArtifactError:
            return None
        return Manifest.from_json(data, source=key)

    def commit_directory(
        self, local_dir: Path, prefix: str, *, on_progress: TransferProgress | None = None
    ) -> Manifest:
        """Upload every file of `local_dir` under `prefix`, then the manifest last.

        Keys are immutable once committed: a prefix whose manifest differs from
        this directory's raises StorageError; an identical one is repaired (files
        missing or damaged re-uploaded) and its manifest returned unchanged.
        `on_progress` hears `(bytes stored, total bytes)` before the first file and after each.
        """
        prefix = validate_key(prefix)
        source = Path(local_dir)
        manifest, paths = _scan_directory(source)
        existing = self.read_manifest(prefix)
        if existing is not None and existing != manifest:
            raise StorageError(
                f"{prefix} is already committed with different content; "
                "committed keys are immutable (delete the prefix first to replace it)"
            )
        done, total = 0, manifest.total_bytes
        if on_progress is not None:
            on_progress(done, total)
        for entry in manifest.files:
            key = join_key(prefix, entry.path)
            if existing is None or not _matches(self.stat(key), entry):
                self._upload(key, paths[entry.path], entry.sha256)
                failpoint("storage_mid_upload")  # crash test hook: some files stored, no manifest yet
            done += entry.size
            if on_progress is not None:
                on_progress(done, total)
        if existing is None:
            # Last, so that a manifest's presence proves every file before it was stored.
            self.put_bytes(join_key(prefix, MANIFEST_NAME), manifest.to_json())
        return manifest

    def verify(self, prefix: str) -> bool:
        """True when the manifest is present and every file it lists matches its size and sha256."""
        try:
            manifest = self.read_manifest(prefix)
        except StorageError:
            return False
        if manifest is None:
            return False
        return all(_matches(self.stat(join_key(prefix, e.path)), e) for e in manifest.files)

    def download_directory(self, prefix: str, dest: Path, *, on_progress: TransferProgress | None = None) -> Manifest:
        """Download a committed prefix into `dest` (with its MANIFEST.json), checking every file.

        Files land in a sibling temp folder first and `dest` is swapped in only
        after every checksum matched, so `dest` never holds a partial download.
        `on_progress` hears `(bytes downloaded, total bytes)` before the first file and after each.
        """
        prefix = validate_key(prefix)
        manifest = self.read_manifest(prefix)
        if manifest is None:
            raise MissingArtifactError(f"{prefix} is not committed: no {MANIFEST_NAME}")
        target = Path(dest)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".{target.name}.part-{secrets.token_hex(6)}")
        staging.mkdir()
        done, total = 0, manifest.total_bytes
        try:
            if on_progress is not None:
                on_progress(done, total)
            for entry in manifest.files:
                local = staging.joinpath(*validate_key(entry.path).split("/"))
                local.parent.mkdir(parents=True, exist_ok=True)
                self._fetch_to(join_key(prefix, entry.path), local)
                _check_file(local, entry, join_key(prefix, entry.path))
                done += entry.size
                if on_progress is not None:
                    on_progress(done, total)
            (staging / MANIFEST_NAME).write_bytes(manifest.to_json())
            _swap_in(staging, target)
        finally:
            if staging.exists():
                shutil.rmtree(staging)
        return manifest


def _scan_directory(source: Path) -> tuple[Manifest, dict[str, Path]]:
    """Manifest entries of every regular file under `source` and where each file is."""
    if not source.is_dir():
        raise StorageError(f"cannot commit {source}: not a directory")
    root = source.resolve()
    entries = []
    paths: dict[str, Path] = {}
    for path in sorted(source.rglob("*")):
        if path.is_dir():
            continue
        resolved = path.resolve()
        if not resolved.is_relative_to(root) or not resolved.is_file():
            raise StorageError(f"cannot commit {path}: it points outside {source} or is not a regular file")
        relative = path.relative_to(source).as_posix()
        if relative == MANIFEST_NAME:
            raise StorageError(f"cannot commit {source}: it already contains a {MANIFEST_NAME}")
        validate_key(relative)
        size = resolved.stat().st_size
        entries.append(ManifestEntry(path=relative, size=size, sha256=file_sha256(resolved)))
        paths[relative] = resolved
    if not entries:
        raise StorageError(f"cannot commit {source}: the directory is empty")
    return Manifest(files=tuple(entries)), paths


def _matches(info: ObjectInfo | None, entry: ManifestEntry) -> bool:
    return info is not None and info.size == entry.size and info.sha256 == entry.sha256


def _check_file(path: Path, entry: ManifestEntry, key: str) -> None:
    """Raise StorageError unless the downloaded file has the manifest's size and sha256."""
    size = path.stat().st_size
    digest = file_sha256(path)
    if size != entry.size or digest != entry.sha256:
        raise StorageError(
            f"{key}: checksum mismatch (expected {entry.size} bytes sha256 {entry.sha256[:12]}…, "
            f"got {size} bytes sha256 {digest[:12]}…); refusing the download"
        )


def _swap_in(staging: Path, target: Path) -> None:
    """Put the complete `staging` folder at `target`, replacing an older copy."""
    if not target.exists():
        os.replace(staging, target)
        return
    trash = target.with_name(f".{target.name}.old-{secrets.token_hex(6)}")
    os.replace(target, trash)
    os.replace(staging, target)
    if trash.is_dir():
        shutil.rmtree(trash)
    else:
        trash.unlink()
