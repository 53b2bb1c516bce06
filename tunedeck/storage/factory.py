"""Open the artifact store named by a URL (`TUNEDECK_STORAGE_URL`), or by the settings."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import ArtifactStore
from tunedeck.storage.encryption import Keyring

if TYPE_CHECKING:
    from tunedeck.core.settings import Settings
    from tunedeck.storage.s3 import ServerSideEncryption


def open_store_from_settings(settings: Settings) -> ArtifactStore:
    """The artifact store every process (API, worker, CLI) uses: URL, endpoint and encryption from the settings.

    Raises StorageError when the encryption settings are invalid (unreadable or
    unprotected key file, malformed key, unknown server-side encryption).
    """
    from tunedeck.storage.s3 import ServerSideEncryption

    url = settings.resolved_storage_url()
    sse = ServerSideEncryption.from_settings(settings)
    if sse is not None and urlparse(url).scheme != "s3":
        raise StorageError(f"TUNEDECK_S3_SSE is set but the storage {url} is not an S3 bucket")
    return open_store(url, s3_endpoint_url=settings.s3_endpoint_url, keyring=Keyring.from_settings(settings), sse=sse)


def open_store(
    url: str,
    *,
    s3_endpoint_url: str | None = None,
    multipart_threshold: int | None = None,
    keyring: Keyring | None = None,
    sse: ServerSideEncryption | None = None,
) -> ArtifactStore:
    """An `ArtifactStore` for `file:///absolute/folder` or `s3://bucket/optional/prefix`.

    `s3_endpoint_url` points boto3 at an S3-compatible server; `multipart_threshold`
    (bytes) overrides when uploads switch to multipart. With a `keyring` every object
    is encrypted before it is stored; `sse` asks S3 to encrypt at rest too (S3 only).
    """
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise StorageError(f"storage URL {url!r}: file URLs must be file:///absolute/path")
        path = Path(unquote(parsed.path))
        if not path.is_absolute():
            raise StorageError(f"storage URL {url!r}: the folder must be an absolute path")
        from tunedeck.storage.local import LocalArtifactStore

        return LocalArtifactStore(path, keyring=keyring)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise StorageError(f"storage URL {url!r}: expected s3://bucket/prefix")
        from tunedeck.storage.s3 import (
            DEFAULT_MULTIPART_CHUNKSIZE,
            DEFAULT_MULTIPART_THRESHOLD,
            MIN_PART_SIZE,
            S3ArtifactStore,
        )

        threshold = multipart_threshold or DEFAULT_MULTIPART_THRESHOLD
        return S3ArtifactStore(
            parsed.netloc,
            unquote(parsed.path).strip("/"),
            endpoint_url=s3_endpoint_url,
            multipart_threshold=threshold,
            # Parts no larger than the threshold, so a lowered threshold really splits files.
            multipart_chunksize=max(MIN_PART_SIZE, min(DEFAULT_MULTIPART_CHUNKSIZE, threshold)),
            keyring=keyring,
            sse=sse,
        )
    raise StorageError(f"storage URL {url!r}: expected file:///path or s3://bucket/prefix")
