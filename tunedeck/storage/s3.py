"""Artifact storage in an S3 bucket (or any S3-compatible server), through boto3.

Credentials come from boto3's standard chain (environment, shared files,
instance roles); tunedeck never reads or stores them. Each object carries its
sha256 in the `sha256` user metadata, so `verify` can check a whole checkpoint
with HEAD requests only; downloads recompute the digest from the bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import MissingArtifactError, ObjectInfo, validate_key
from tunedeck.storage.committing import ManifestedStore

DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024
DEFAULT_MULTIPART_CHUNKSIZE = 16 * 1024 * 1024
MIN_PART_SIZE = 5 * 1024 * 1024  # S3's smallest part, except the last one
_MISSING_CODES = frozenset({"404", "NoSuchKey", "NotFound"})


class S3ArtifactStore(ManifestedStore):
    """Keys live under `s3://bucket/prefix/`.

    `multipart_threshold` and `multipart_chunksize` tune boto3's transfer
    manager: files at least as large as the threshold are uploaded in parts
    (S3 requires parts of 5 MiB or more, except the last).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        client: Any | None = None,
        multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
        multipart_chunksize: int = DEFAULT_MULTIPART_CHUNKSIZE,
    ) -> None:
        if not bucket:
            raise StorageError("an S3 store needs a bucket name")
        self.bucket = bucket
        self.prefix = validate_key(prefix, allow_empty=True)
        self.endpoint_url = endpoint_url
        self._client = client
        self._threshold = multipart_threshold
        self._chunksize = multipart_chunksize

    def __repr__(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        return f"S3ArtifactStore({where!r}, endpoint_url={self.endpoint_url!r})"

    @property
    def client(self) -> Any:
        """The boto3 S3 client, created on first use (not at construction)."""
        if self._client is None:
            import boto3  # deferred: importing boto3 is slow and most commands never touch S3
            from botocore.config import Config

            # Custom endpoints (S3-compatible servers) rarely resolve bucket subdomains.
            style = "path" if self.endpoint_url else "auto"
            self._client = boto3.session.Session().client(
                "s3",
                endpoint_url=self.endpoint_url,
                config=Config(s3={"addressing_style": style}, retries={"max_attempts": 5, "mode": "standard"}),
            )
        return self._client

    def _transfer_config(self) -> Any:
        from boto3.s3.transfer import TransferConfig

        return TransferConfig(multipart_threshold=self._threshold, multipart_chunksize=self._chunksize)

    def _full(self, key: str, *, allow_empty: bool = False) -> str:
        normalised = validate_key(key, allow_empty=allow_empty)
        return "/".join(part for part in (self.prefix, normalised) if part)

    def _call(self, what: str, action: Any) -> Any:
        """Run one S3 call, turning botocore errors into StorageError / MissingArtifactError."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return action()
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code in _MISSING_CODES:
                raise MissingArtifactError(f"no artifact at {what}") from None
            raise StorageError(f"S3 error on {what}: {code or error}") from None
        except BotoCoreError as error:
            raise StorageError(f"S3 error on {what}: {error}") from None

    def _upload(self, key: str, path: Path, sha256: str) -> ObjectInfo:
        full = self._full(key)
        self._call(
            key,
            lambda: self.client.upload_file(
                str(path),
                self.bucket,
                full,
                ExtraArgs={"Metadata": {"sha256": sha256}},
                Config=self._transfer_config(),
            ),
        )
        return ObjectInfo(size=path.stat().st_size, sha256=sha256)

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store `data` at `key` in one PUT, with its sha256 in the metadata."""
        digest = hashlib.sha256(data).hexdigest()
        full = self._full(key)
        self._call(
            key,
            lambda: self.client.put_object(Bucket=self.bucket, Key=full, Body=data, Metadata={"sha256": digest}),
        )
        return ObjectInfo(size=len(data), sha256=digest)

    def _fetch_to(self, key: str, target: Path) -> None:
        full = self._full(key)
        self._call(
            key,
            lambda: self.client.download_file(self.bucket, full, str(target), Config=self._transfer_config()),
        )

    def read_bytes(self, key: str) -> bytes:
        """The whole object at `key`."""
        full = self._full(key)
        response = self._call(key, lambda: self.client.get_object(Bucket=self.bucket, Key=full))
        body: bytes = response["Body"].read()
        return body

    def stat(self, key: str) -> ObjectInfo | None:
        """Size from a HEAD request and the sha256 recorded in the metadata at upload."""
        full = self._full(key)
        try:
            head = self._call(key, lambda: self.client.head_object(Bucket=self.bucket, Key=full))
        except MissingArtifactError:
            return None
        return ObjectInfo(size=int(head["ContentLength"]), sha256=head.get("Metadata", {}).get("sha256"))

    def exists(self, key: str) -> bool:
        """Whether an object is stored at `key` (one HEAD request)."""
        return self.stat(key) is not None

    def list(self, prefix: str = "") -> list[str]:
        """Every key under the folder `prefix`, relative to the store's prefix, sorted."""
        folder = self._full(prefix, allow_empty=True)
        search = f"{folder}/" if folder else ""
        strip = len(f"{self.prefix}/") if self.prefix else 0
        keys: list[str] = []

        def collect() -> None:
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=search):
                keys.extend(item["Key"][strip:] for item in page.get("Contents", []))

        self._call(prefix or "/", collect)
        return sorted(keys)

    def usage_bytes(self, prefix: str) -> int:
        """Sum of the sizes of the objects under the folder `prefix`, from the listing (no object is read)."""
        search = f"{self._full(prefix)}/"
        total = 0

        def add_sizes() -> None:
            nonlocal total
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=search):
                total += sum(int(item["Size"]) for item in page.get("Contents", []))

        self._call(prefix, add_sizes)
        return total

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key under the folder `prefix` (1000 keys a request)."""
        validate_key(prefix)  # an empty prefix is refused: it would delete the whole store
        keys = self.list(prefix)
        for start in range(0, len(keys), 1000):
            batch = [{"Key": self._full(k)} for k in keys[start : start + 1000]]
            self._call(
                prefix,
                lambda batch=batch: self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True}
                ),
            )
        return len(keys)

    def presigned_url(self, key: str, expires_s: int = 300) -> str | None:
        """A GET URL valid for `expires_s` seconds."""
        full = self._full(key)
        url: str = self._call(
            key,
            lambda: self.client.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": full}, ExpiresIn=int(expires_s)
            ),
        )
        return url

    def create_bucket_if_missing(self) -> None:
        """Create the bucket when it does not exist (for demos and first starts)."""
        from botocore.exceptions import ClientError

        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            region = self.client.meta.region_name
            extra: dict[str, Any] = {}
            if region and region != "us-east-1":  # the one region that refuses a location constraint
                extra["CreateBucketConfiguration"] = {"LocationConstraint": region}
            self._call(self.bucket, lambda: self.client.create_bucket(Bucket=self.bucket, **extra))
