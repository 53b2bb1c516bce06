"""Artifact storage in a local folder (the default, and what a single machine needs)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import RESERVED_ROOT, MissingArtifactError, ObjectInfo, file_sha256, validate_key
from tunedeck.storage.committing import ManifestedStore


class LocalArtifactStore(ManifestedStore):
    """Keys are files under `root`; every write goes to `root/.staging` first, then is renamed in.

    The folder is created on the first write, never at construction.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

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
        with self._staged(key) as temp:
            shutil.copyfile(path, temp)
        return ObjectInfo(size=self._path(key).stat().st_size, sha256=sha256)

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store `data` at `key` atomically."""
        with self._staged(key) as temp:
            temp.write_bytes(data)
        return ObjectInfo(size=len(data), sha256=None)

    def _fetch_to(self, key: str, target: Path) -> None:
        path = self._existing(key)
        shutil.copyfile(path, target)

    def _existing(self, key: str) -> Path:
        path = self._path(key)
        if not path.is_file():
            raise MissingArtifactError(f"no artifact at {key}")
        return path

    def read_bytes(self, key: str) -> bytes:
        """The whole file at `key`."""
        return self._existing(key).read_bytes()

    def stat(self, key: str) -> ObjectInfo | None:
        """Size and sha256 computed from the bytes on disk (so damage on disk is always seen)."""
        path = self._path(key)
        if not path.is_file():
            return None
        return ObjectInfo(size=path.stat().st_size, sha256=file_sha256(path))

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
        """Sum of the sizes of the files under the folder `prefix`."""
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
