"""Open the artifact store named by a URL (`TUNEDECK_STORAGE_URL`)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import ArtifactStore


def open_store(
    url: str,
    *,
    s3_endpoint_url: str | None = None,
    multipart_threshold: int | None = None,
) -> ArtifactStore:
    """An `ArtifactStore` for `file:///absolute/folder` or `s3://bucket/optional/prefix`.

    `s3_endpoint_url` points boto3 at an S3-compatible server; `multipart_threshold`
    (bytes) overrides when uploads switch to multipart.
    """
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise StorageError(f"storage URL {url!r}: file URLs must be file:///absolute/path")
        path = Path(unquote(parsed.path))
        if not path.is_absolute():
            raise StorageError(f"storage URL {url!r}: the folder must be an absolute path")
        from tunedeck.storage.local import LocalArtifactStore

        return LocalArtifactStore(path)
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
        )
    raise StorageError(f"storage URL {url!r}: expected file:///path or s3://bucket/prefix")
