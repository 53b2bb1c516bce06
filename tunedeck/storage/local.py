"""Artifact storage in a local folder (the default, and what a single machine needs).

With a keyring, every file is stored encrypted in the self-contained form of
`tunedeck.storage.encryption`: a fixed-length header holding the envelope, then the
sealed chunks, so a key rotation rewrites only the header, in place.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import RESERVED_ROOT, MissingArtifactError, ObjectInfo, file_sha256, validate_key
from tunedeck.storage.committing import ManifestedStore
from tunedeck.storage.encryption import (
    DEFAULT_CHUNK_SIZE,
    MAGIC,
    DataKey,
    EncryptionError,
    Envelope,
    Keyring,
    decrypt_chunks,
    encrypt_chunks,
    header_bytes,
    open_stored,
    read_header,
)


class _Discard:
    """A sink that keeps nothing (to authenticate a file without writing it anywhere)."""

    def write(self, data: bytes) -> int:
        return len(data)


class LocalArtifactStore(ManifestedStore):
    """Keys are files under `root`; every write goes to `root/.staging` first, then is renamed in.

    The folder is created on the first write, never at construction. With a `keyring`
    every file is encrypted on the way in and decrypted on the way out.
    """

    def __init__(self, root: Path, *, keyring: Keyring | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        self.root = Path(root).resolve()
        self.keyring = keyring
        self.chunk_size = chunk_size

    def __repr__(self) -> str:
        return f"LocalArtifactStore({str(self.root)!r})"

    def _path(self, key: str, *, allow_empty: bool = False) -> Path:
        """The file of `key`, refusing any key that resolves outside the root (symlinks included)."""
        normalised = validate_key(key, allow_empty=allow_empty)
        path = (self.root / normalised).resolve() if normalised else self.root
        if path != self.root and not path.is_relative_to(self.root):
            raise StorageError(f"storage key {key!r} resolves outside the store")
        return path

    @contextmanager
    def _staged(self, key: str) -> Iterator[Path]:
        """A temp file the caller fills; renamed onto `key` when the block succeeds."""
        target = self._path(key)
        staging = self.root / RESERVED_ROOT
        try:
            staging.mkdir(parents=True, exist_ok=True)
            handle, name = tempfile.mkstemp(dir=staging, prefix="put-")
            os.close(handle)
        except OSError as error:
            raise StorageError(f"cannot write {key}: {error}") from None
        temp = Path(name)
        try:
            yield temp
            with open(temp, "rb") as handle_r:
                os.fsync(handle_r.fileno())
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(temp, target)
        except OSError as error:
            raise StorageError(f"cannot write {key}: {error}") from None
        finally:
            temp.unlink(missing_ok=True)

    def _upload(self, key: str, path: Path, sha256: str) -> ObjectInfo:
        if self.keyring is None:
            with self._staged(key) as temp:
                shutil.copyfile(path, temp)
            return ObjectInfo(size=self._path(key).stat().st_size, sha256=sha256)
        size = path.stat().st_size
        with open(path, "rb") as source:
            self._store_encrypted(key, source, size, sha256)
        return ObjectInfo(size=size, sha256=sha256)

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store `data` at `key` atomically."""
        if self.keyring is not None:
            self._store_encrypted(key, io.BytesIO(data), len(data), hashlib.sha256(data).hexdigest())
            return ObjectInfo(size=len(data), sha256=None)
        with self._staged(key) as temp:
            temp.write_bytes(data)
        return ObjectInfo(size=len(data), sha256=None)

    def _store_encrypted(self, key: str, source: BinaryIO, size: int, sha256: str) -> None:
        assert self.keyring is not None
        data_key = DataKey.new(self.chunk_size)
        # "r+b": the staged file exists and is empty; truncating it would make the filesystem flush it on close.
        with self._staged(key) as temp, open(temp, "r+b") as sink:
            sink.write(header_bytes(self.keyring.seal(data_key, size, sha256)))
            if encrypt_chunks(data_key, source, sink) != size:
                raise StorageError(f"cannot store {key}: the file changed while it was being stored")

    def _fetch_to(self, key: str, target: Path) -> None:
        self._existing(key)  # before `target` is created
        with open(target, "wb") as sink:
            self._write_plaintext(key, sink)

    def _write_plaintext(self, key: str, sink: BinaryIO) -> None:
        """Copy the object's plaintext into `sink`, decrypting (and authenticating) an encrypted file."""
        with open(self._existing(key), "rb") as source:
            opened = open_stored(self.keyring, read_header(source, what=key), what=key)
            if opened is None:
                source.seek(0)
                shutil.copyfileobj(source, sink)
            else:
                decrypt_chunks(opened, source, sink, what=key)

    def _existing(self, key: str) -> Path:
        path = self._path(key)
        if not path.is_file():
            raise MissingArtifactError(f"no artifact at {key}")
        return path

    def read_bytes(self, key: str) -> bytes:
        """The whole file at `key` (decrypted when the store is encrypted)."""
        sink = io.BytesIO()
        self._write_plaintext(key, sink)
        return sink.getvalue()

    def stat(self, key: str) -> ObjectInfo | None:
        """Size and sha256 of the plaintext, from the bytes on disk (so damage on disk is always seen).

        An encrypted file is authenticated chunk by chunk and reports the size and sha256 its
        envelope seals; one that fails authentication reports no sha256, so it never matches.
        """
        path = self._path(key)
        if not path.is_file():
            return None
        with open(path, "rb") as source:
            opened = open_stored(self.keyring, read_header(source, what=key), what=key)
            if opened is None:
                return ObjectInfo(size=path.stat().st_size, sha256=file_sha256(path))
            try:
                decrypt_chunks(opened, source, _Discard(), what=key, check_sha256=False)  # type: ignore[arg-type]
            except EncryptionError:
                return ObjectInfo(size=opened.size, sha256=None)
        return ObjectInfo(size=opened.size, sha256=opened.sha256)

    def exists(self, key: str) -> bool:
        """Whether a file is stored at `key`."""
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> list[str]:
        """Every key under the folder `prefix`, sorted; the staging area is never listed."""
        base = self._path(prefix, allow_empty=True)
        if not base.is_dir():
            return []
        keys = []
        for path in base.rglob("*"):
            relative = path.relative_to(self.root).as_posix()
            if relative.split("/", 1)[0] == RESERVED_ROOT or not path.is_file():
                continue
            keys.append(relative)
        return sorted(keys)

    def usage_bytes(self, prefix: str) -> int:
        """Sum of the sizes of the files under the folder `prefix` as stored.

        Encrypted files count their stored (ciphertext) size: header and tags included.
        """
        base = self._path(prefix)
        if not base.is_dir():
            return 0
        return sum(path.stat().st_size for path in base.rglob("*") if path.is_file() and not path.is_symlink())

    def delete_prefix(self, prefix: str) -> int:
        """Delete the folder `prefix` and everything in it."""
        base = self._path(prefix)  # an empty prefix is refused: it would delete the whole store
        count = len(self.list(prefix))
        if base.is_dir():
            shutil.rmtree(base)
        return count

    def presigned_url(self, key: str, expires_s: int = 300) -> str | None:
        """Local files have no URL; the API streams them instead."""
        self._path(key)
        return None

    # -- key rotation ---------------------------------------------------------------

    def _stored_envelope(self, key: str) -> Envelope | None:
        with open(self._existing(key), "rb") as source:
            return read_header(source, what=key)

    def _replace_envelope(self, key: str, envelope: Envelope) -> None:
        """Rewrite the header in place (same length), flushed to disk before returning."""
        path = self._existing(key)
        try:
            with open(path, "r+b") as handle:
                if handle.read(len(MAGIC)) != MAGIC:
                    raise StorageError(f"{key}: not an encrypted file; cannot replace its key envelope")
                handle.seek(0)
                handle.write(header_bytes(envelope))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as error:
            raise StorageError(f"cannot rewrite {key}: {error}") from None

    def _fetch_raw_to(self, key: str, target: Path) -> None:
        shutil.copyfile(self._existing(key), target)
