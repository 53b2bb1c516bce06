"""The artifact storage contract: the `ArtifactStore` protocol, manifests and the key layout.

Keys are `/`-separated relative paths (`users/<user>/jobs/<job>/checkpoints/step-00000100/...`).
A "prefix" names a folder of keys; a prefix is committed once its `MANIFEST.json`
(every file's relative path, size and sha256) is present, and the manifest is
always written last, so a reader that sees a manifest knows every file it names
was uploaded before it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from tunedeck.core.errors import NotFoundError, StorageError

MANIFEST_NAME = "MANIFEST.json"
MANIFEST_FORMAT = "tunedeck.manifest/1"
_CHUNK = 1024 * 1024
_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9_.-]+$")
# Reserved for the local backend's staging area; a key may not start with it.
RESERVED_ROOT = ".staging"

# Told `(bytes_done, bytes_total)` as a prefix is committed or downloaded: once before the first file,
# then after each file (on a repair, a file already stored counts as done). Called on the caller's
# thread; what it raises ends the transfer (a commit then has no manifest, a download leaves nothing).
TransferProgress = Callable[[int, int], None]


class MissingArtifactError(StorageError, NotFoundError):
    """A key or prefix that should exist in the store does not."""


@dataclass(frozen=True)
class ManifestEntry:
    """One committed file: its path relative to the prefix, size in bytes and sha256 (hex)."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    """The list of files of a committed prefix, sorted by path."""

    files: tuple[ManifestEntry, ...]

    def to_json(self) -> bytes:
        """Canonical bytes: the same files always give the same bytes (and the same digest)."""
        body = {
            "format": MANIFEST_FORMAT,
            "files": [{"path": f.path, "size": f.size, "sha256": f.sha256} for f in self.files],
        }
        return json.dumps(body, indent=1, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, source: str = MANIFEST_NAME) -> Manifest:
        """Parse manifest bytes; StorageError when they are not a tunedeck manifest."""
        try:
            body = json.loads(data)
            if body.get("format") != MANIFEST_FORMAT:
                raise ValueError(f"unknown format {body.get('format')!r}")
            files = tuple(
                ManifestEntry(path=str(f["path"]), size=int(f["size"]), sha256=str(f["sha256"])) for f in body["files"]
            )
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise StorageError(f"{source}: not a valid manifest ({error})") from None
        return cls(files=tuple(sorted(files, key=lambda f: f.path)))

    @property
    def digest(self) -> str:
        """sha256 of the canonical manifest bytes; the checkpoint row stores it."""
        return hashlib.sha256(self.to_json()).hexdigest()

    @property
    def total_bytes(self) -> int:
        """Sum of the file sizes."""
        return sum(f.size for f in self.files)

    def entry(self, path: str) -> ManifestEntry | None:
        """The entry for a relative path, if the manifest covers it."""
        for item in self.files:
            if item.path == path:
                return item
        return None


@dataclass(frozen=True)
class ObjectInfo:
    """What a store knows about one stored object without reading it all.

    `sha256` is the digest recorded at upload (S3 object metadata) or computed
    from the bytes (local folder); None when the store has no digest for it.
    """

    size: int
    sha256: str | None


@runtime_checkable
class ArtifactStore(Protocol):
    """Where checkpoints, datasets and exports live: a local folder or an S3 bucket.

    Every method takes keys relative to the store's root; no method accepts an
    absolute path or a `..` segment. Writes of a single key are atomic: a reader
    sees the old object, the new one, or none, never a partial one.
    """

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        """Upload a local file to `key` (multipart on S3 for large files); records its sha256."""
        ...

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store `data` at `key`."""
        ...

    def get_file(self, key: str, dest: Path) -> Path:
        """Download `key` to `dest` atomically; verifies sha256 when a manifest covers the key."""
        ...

    def read_bytes(self, key: str) -> bytes:
        """The whole object at `key` (for small objects such as manifests and reports)."""
        ...

    def exists(self, key: str) -> bool:
        """Whether an object is stored at `key`."""
        ...

    def stat(self, key: str) -> ObjectInfo | None:
        """Size and recorded sha256 of `key`, or None when absent."""
        ...

    def list(self, prefix: str = "") -> list[str]:
        """Every key under the folder `prefix` (all keys when empty), sorted."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key under the folder `prefix`; returns how many were deleted."""
        ...

    def usage_bytes(self, prefix: str) -> int:
        """Total size of every object under the folder `prefix` (0 when there is none)."""
        ...

    def presigned_url(self, key: str, expires_s: int = 300) -> str | None:
        """A short-lived download URL (S3), or None where the store has none (local)."""
        ...

    def commit_directory(
        self, local_dir: Path, prefix: str, *, on_progress: TransferProgress | None = None
    ) -> Manifest:
        """Upload every file of `local_dir` under `prefix`, then `MANIFEST.json` last.

        Idempotent when the prefix already holds an identical manifest (missing or
        damaged files are re-uploaded); raises StorageError when it holds a different one.
        `on_progress` hears the bytes stored so far (see `TransferProgress`).
        """
        ...

    def read_manifest(self, prefix: str) -> Manifest | None:
        """The manifest of `prefix`, or None when the prefix is not committed."""
        ...

    def verify(self, prefix: str) -> bool:
        """True when the manifest is present and every file matches its size and sha256."""
        ...

    def download_directory(self, prefix: str, dest: Path, *, on_progress: TransferProgress | None = None) -> Manifest:
        """Download a committed prefix into `dest`, checking every checksum; all or nothing.

        `on_progress` hears the bytes downloaded so far (see `TransferProgress`).
        """
        ...


def validate_key(key: str, *, allow_empty: bool = False) -> str:
    """Return the normalised key (no trailing `/`), or raise StorageError for an unsafe one."""
    if not isinstance(key, str):
        raise StorageError(f"storage key must be a string, got {type(key).__name__}")
    normalised = key.strip("/") if allow_empty else key.rstrip("/")
    if not normalised:
        if allow_empty:
            return ""
        raise StorageError("storage key is empty")
    if normalised.startswith("/") or "\\" in normalised or "\x00" in normalised:
        raise StorageError(f"unsafe storage key {key!r}: keys are relative, `/`-separated paths")
    parts = normalised.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise StorageError(f"unsafe storage key {key!r}: empty, `.` or `..` segment")
    if parts[0] == RESERVED_ROOT:
        raise StorageError(f"unsafe storage key {key!r}: {RESERVED_ROOT!r} is reserved")
    return normalised


def join_key(prefix: str, relative: str) -> str:
    """`prefix/relative`, both validated."""
    head = validate_key(prefix, allow_empty=True)
    tail = validate_key(relative)
    return f"{head}/{tail}" if head else tail


def file_sha256(path: Path) -> str:
    """sha256 (hex) of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _segment(value: str, what: str) -> str:
    if not _SAFE_SEGMENT.match(value) or value in (".", ".."):
        raise StorageError(f"{what} {value!r} cannot be used in a storage key")
    return value


def user_prefix(user_id: str) -> str:
    """Folder of everything one user owns."""
    return f"users/{_segment(user_id, 'user id')}"


def stored_bytes_of_user(store: ArtifactStore, user_id: str) -> int:
    """Everything one user keeps in `store`: datasets, checkpoints, final models and exports."""
    return store.usage_bytes(user_prefix(user_id))


def job_prefix(user_id: str, job_id: str) -> str:
    """Folder of one job's artifacts: `users/<user>/jobs/<job>`."""
    return f"{user_prefix(user_id)}/jobs/{_segment(job_id, 'job id')}"


def checkpoint_prefix(user_id: str, job_id: str, step: int) -> str:
    """Folder of the checkpoint at `step`; zero-padded so listings sort by step."""
    if step < 0:
        raise StorageError(f"checkpoint step must be >= 0, got {step}")
    return f"{job_prefix(user_id, job_id)}/checkpoints/step-{step:010d}"


def final_prefix(user_id: str, job_id: str) -> str:
    """Folder of the job's final model or adapter."""
    return f"{job_prefix(user_id, job_id)}/final"


def dataset_prefix(user_id: str, dataset_version_id: str) -> str:
    """Folder of one stored dataset version."""
    return f"{user_prefix(user_id)}/datasets/{_segment(dataset_version_id, 'dataset version id')}"


def upload_prefix(user_id: str, upload_id: str) -> str:
    """Folder of one received upload waiting for its ingestion (removed once it ends)."""
    return f"{user_prefix(user_id)}/uploads/{_segment(upload_id, 'upload id')}"
