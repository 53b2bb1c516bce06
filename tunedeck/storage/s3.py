"""Artifact storage in an S3 bucket (or any S3-compatible server), through boto3.

Credentials come from boto3's standard chain (environment, shared files,
instance roles); tunedeck never reads or stores them. Each object carries its
sha256 in the `sha256` user metadata, so `verify` can check a whole checkpoint
with HEAD requests only; downloads recompute the digest from the bytes.

With a keyring, the body of each object is the sealed chunks of its plaintext and
the key envelope (which seals the plaintext's size and sha256) is in the
`tunedeck-envelope` user metadata instead; uploads encrypt and downloads decrypt on the fly.
"""

from __future__ import annotations

import hashlib
import io
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import MissingArtifactError, ObjectInfo, validate_key
from tunedeck.storage.committing import ManifestedStore
from tunedeck.storage.encryption import (
    DEFAULT_CHUNK_SIZE,
    DataKey,
    EncryptingReader,
    Envelope,
    Keyring,
    decrypt_chunks,
    encrypt_chunks,
    open_stored,
)

if TYPE_CHECKING:
    from tunedeck.core.settings import Settings

DEFAULT_MULTIPART_THRESHOLD = 64 * 1024 * 1024
DEFAULT_MULTIPART_CHUNKSIZE = 16 * 1024 * 1024
MIN_PART_SIZE = 5 * 1024 * 1024  # S3's smallest part, except the last one
MAX_SINGLE_COPY = 5 * 1024**3  # larger objects can only be copied in parts
_MISSING_CODES = frozenset({"404", "NoSuchKey", "NotFound"})
ENVELOPE_METADATA = "tunedeck-envelope"
SSE_ALGORITHMS = ("AES256", "aws:kms")


@dataclass(frozen=True)
class ServerSideEncryption:
    """The encryption S3 applies to every object tunedeck writes: `AES256`, or `aws:kms` with an optional key."""

    algorithm: str
    kms_key_id: str | None = None

    def __post_init__(self) -> None:
        if self.algorithm not in SSE_ALGORITHMS:
            raise StorageError(f"TUNEDECK_S3_SSE={self.algorithm!r}: expected one of {', '.join(SSE_ALGORITHMS)}")
        if self.kms_key_id is not None and self.algorithm != "aws:kms":
            raise StorageError("TUNEDECK_S3_SSE_KMS_KEY_ID is only used with TUNEDECK_S3_SSE=aws:kms")

    @classmethod
    def from_settings(cls, settings: Settings) -> ServerSideEncryption | None:
        """What `TUNEDECK_S3_SSE` and `TUNEDECK_S3_SSE_KMS_KEY_ID` ask for, or None."""
        if not settings.s3_sse:
            if settings.s3_sse_kms_key_id:
                raise StorageError("TUNEDECK_S3_SSE_KMS_KEY_ID is set but TUNEDECK_S3_SSE is not (set it to aws:kms)")
            return None
        return cls(settings.s3_sse, settings.s3_sse_kms_key_id or None)

    def request_args(self) -> dict[str, str]:
        """The arguments every PUT, upload and copy sends."""
        args = {"ServerSideEncryption": self.algorithm}
        if self.kms_key_id:
            args["SSEKMSKeyId"] = self.kms_key_id
        return args


class S3ArtifactStore(ManifestedStore):
    """Keys live under `s3://bucket/prefix/`.

    `multipart_threshold` and `multipart_chunksize` tune boto3's transfer
    manager: files at least as large as the threshold are uploaded in parts
    (S3 requires parts of 5 MiB or more, except the last). With a `keyring` every
    object is encrypted client-side; `sse` asks S3 to encrypt at rest as well.
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
        keyring: Keyring | None = None,
        sse: ServerSideEncryption | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        if not bucket:
            raise StorageError("an S3 store needs a bucket name")
        self.bucket = bucket
        self.prefix = validate_key(prefix, allow_empty=True)
        self.endpoint_url = endpoint_url
        self._client = client
        self._threshold = multipart_threshold
        self._chunksize = multipart_chunksize
        self.keyring = keyring
        self.sse = sse
        self.chunk_size = chunk_size

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

    def _write_args(self, metadata: dict[str, str]) -> dict[str, Any]:
        """Metadata plus the server-side encryption every write sends."""
        return {"Metadata": metadata, **(self.sse.request_args() if self.sse else {})}

    def _sealed_metadata(self, data_key: DataKey, size: int, sha256: str) -> dict[str, str]:
        assert self.keyring is not None
        return {ENVELOPE_METADATA: self.keyring.seal(data_key, size, sha256).to_text()}

    def _upload(self, key: str, path: Path, sha256: str) -> ObjectInfo:
        full = self._full(key)
        size = path.stat().st_size
        if self.keyring is None:
            self._call(
                key,
                lambda: self.client.upload_file(
                    str(path),
                    self.bucket,
                    full,
                    ExtraArgs=self._write_args({"sha256": sha256}),
                    Config=self._transfer_config(),
                ),
            )
            return ObjectInfo(size=size, sha256=sha256)
        data_key = DataKey.new(self.chunk_size)
        extra = self._write_args(self._sealed_metadata(data_key, size, sha256))
        with open(path, "rb") as source:
            # Encrypted while it streams out: the transfer manager reads one part at a time.
            reader = EncryptingReader(data_key, source)
            self._call(
                key,
                lambda: self.client.upload_fileobj(
                    reader, self.bucket, full, ExtraArgs=extra, Config=self._transfer_config()
                ),
            )
        return ObjectInfo(size=size, sha256=sha256)

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        """Store `data` at `key` in one PUT, with its sha256 in the metadata (sealed, when encrypted)."""
        digest = hashlib.sha256(data).hexdigest()
        full = self._full(key)
        body, metadata = data, {"sha256": digest}
        if self.keyring is not None:
            data_key = DataKey.new(self.chunk_size)
            metadata = self._sealed_metadata(data_key, len(data), digest)
            sealed = io.BytesIO()
            encrypt_chunks(data_key, io.BytesIO(data), sealed)
            body = sealed.getvalue()
        extra = self._write_args(metadata)
        self._call(key, lambda: self.client.put_object(Bucket=self.bucket, Key=full, Body=body, **extra))
        return ObjectInfo(size=len(data), sha256=digest)

    def _fetch_to(self, key: str, target: Path) -> None:
        if self.keyring is None:
            # Plaintext: the transfer manager's parallel ranged GETs, once a HEAD shows it is not encrypted.
            head = self._head(key)
            if head is None:
                raise MissingArtifactError(f"no artifact at {key}")
            open_stored(None, _envelope_of(head, key), what=key)
            self._fetch_raw_to(key, target)
            return
        with open(target, "wb") as sink:
            self._write_plaintext(key, sink)

    def _write_plaintext(self, key: str, sink: BinaryIO) -> None:
        """Stream the object's plaintext into `sink`, decrypting (and authenticating) an encrypted one."""
        full = self._full(key)

        def transfer() -> None:
            response = self.client.get_object(Bucket=self.bucket, Key=full)
            opened = open_stored(self.keyring, _envelope_of(response, key), what=key)
            if opened is None:
                shutil.copyfileobj(response["Body"], sink, 1024 * 1024)
            else:
                decrypt_chunks(opened, response["Body"], sink, what=key)

        self._call(key, transfer)

    def read_bytes(self, key: str) -> bytes:
        """The whole object at `key` (decrypted when the store is encrypted)."""
        sink = io.BytesIO()
        self._write_plaintext(key, sink)
        return sink.getvalue()

    def _head(self, key: str) -> dict[str, Any] | None:
        full = self._full(key)
        try:
            head: dict[str, Any] = self._call(key, lambda: self.client.head_object(Bucket=self.bucket, Key=full))
        except MissingArtifactError:
            return None
        return head

    def stat(self, key: str) -> ObjectInfo | None:
        """Size from a HEAD request and the sha256 recorded in the metadata at upload.

        An encrypted object reports its plaintext's size and sha256, from its envelope.
        """
        head = self._head(key)
        if head is None:
            return None
        opened = open_stored(self.keyring, _envelope_of(head, key), what=key)
        if opened is not None:
            return ObjectInfo(size=opened.size, sha256=opened.sha256)
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
        """Sum of the sizes of the objects under the folder `prefix`, from the listing (no object is read).

        Encrypted objects count their stored (ciphertext) size.
        """
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
        """A GET URL valid for `expires_s` seconds; None when encrypted (the bytes must be decrypted here)."""
        full = self._full(key)
        if self.keyring is not None:
            return None
        url: str = self._call(
            key,
            lambda: self.client.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": full}, ExpiresIn=int(expires_s)
            ),
        )
        return url

    # -- key rotation ---------------------------------------------------------------

    def _stored_envelope(self, key: str) -> Envelope | None:
        head = self._head(key)
        if head is None:
            raise MissingArtifactError(f"no artifact at {key}")
        return _envelope_of(head, key)

    def _replace_envelope(self, key: str, envelope: Envelope) -> None:
        """Copy the object onto itself with the new envelope: S3 re-writes only metadata, the body is kept."""
        head = self._head(key)
        if head is None:
            raise MissingArtifactError(f"no artifact at {key}")
        full = self._full(key)
        source = {"Bucket": self.bucket, "Key": full}
        extra = {"MetadataDirective": "REPLACE", **self._write_args({ENVELOPE_METADATA: envelope.to_text()})}
        if int(head["ContentLength"]) > MAX_SINGLE_COPY:
            self._call(
                key,
                lambda: self.client.copy(source, self.bucket, full, ExtraArgs=extra, Config=self._transfer_config()),
            )
        else:
            self._call(key, lambda: self.client.copy_object(CopySource=source, Bucket=self.bucket, Key=full, **extra))

    def _fetch_raw_to(self, key: str, target: Path) -> None:
        full = self._full(key)
        self._call(
            key,
            lambda: self.client.download_file(self.bucket, full, str(target), Config=self._transfer_config()),
        )

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


def _envelope_of(response: dict[str, Any], key: str) -> Envelope | None:
    """The envelope in a HEAD or GET response's metadata, or None for a plaintext object."""
    text = response.get("Metadata", {}).get(ENVELOPE_METADATA)
    return None if text is None else Envelope.from_text(text, what=key)
