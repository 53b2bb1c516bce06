"""Receive one multipart file upload by streaming it to disk under a generated name.

FastAPI's `UploadFile` reads the whole body before the route runs, so a size limit
there is checked too late. Here the body is parsed as it arrives and the upload is
refused as soon as it passes `max_bytes`; nothing of the client's file name is used
except a known suffix (so the data layer can detect the format and decompression).
"""

from __future__ import annotations

import codecs
import contextlib
from pathlib import Path
from typing import IO

from fastapi import Request
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from tunedeck.core.dataset_vocabulary import dataset_suffix
from tunedeck.core.ids import new_id
from tunedeck.service.datasets.received_upload import ReceivedUpload

MAX_FIELD_BYTES = 4096
MAX_FIELDS = 16
# Room for multipart boundaries and part headers on top of the file itself.
ENVELOPE_BYTES = 64 * 1024


class UploadRejected(Exception):
    """The request body is not an acceptable upload; `status` is the HTTP status to answer."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def safe_suffix(filename: str | None) -> str:
    """The lower-cased suffix of a client file name when it is one the data layer reads, else ''."""
    if not filename:
        return ""
    return dataset_suffix(filename.replace("\\", "/"))


def client_name(filename: str) -> str:
    """The last path segment of a client file name, printable and at most 200 characters."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return "".join(ch for ch in base if ch.isprintable())[:200]


def contained_path(root: Path, name: str) -> Path:
    """`root / name`, refused unless its resolved form stays inside the resolved root."""
    base = root.resolve()
    candidate = (base / name).resolve()
    if not candidate.is_relative_to(base) or candidate == base:
        raise UploadRejected(400, "invalid upload path")
    return candidate


class _StreamingReceiver:
    """python-multipart callbacks that write the file part straight to disk."""

    def __init__(self, directory: Path, file_field: str, max_bytes: int, charset: str) -> None:
        self.directory = directory
        self.file_field = file_field
        self.max_bytes = max_bytes
        self.charset = charset
        self.fields: dict[str, str] = {}
        self.upload: ReceivedUpload | None = None
        self.finished = False
        self._handle: IO[bytes] | None = None
        self._header_name = b""
        self._header_value = b""
        self._disposition = b""
        self._name = ""
        self._is_file = False
        self._text = bytearray()

    def callbacks(self) -> dict[str, object]:
        return {
            "on_part_begin": self.on_part_begin,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
            "on_header_field": self.on_header_field,
            "on_header_value": self.on_header_value,
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_end": self.on_end,
        }

    def on_part_begin(self) -> None:
        self._disposition = b""
        self._name = ""
        self._is_file = False
        self._text = bytearray()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        if self._header_name.lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name = b""
        self._header_value = b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        if b"name" not in options:
            raise UploadRejected(400, 'a multipart part has no "name" in its Content-Disposition')
        self._name = self._decode(options[b"name"])
        if b"filename" not in options:
            if len(self.fields) >= MAX_FIELDS:
                raise UploadRejected(400, f"too many form fields (at most {MAX_FIELDS})")
            return
        if self._name != self.file_field:
            raise UploadRejected(
                400, f'unexpected file field "{self._name}"; send the file as "{self.file_field}"'
            )
        if self.upload is not None:
            raise UploadRejected(400, "send exactly one file per upload")
        self._is_file = True
        filename = self._decode(options[b"filename"])
        suffix = safe_suffix(filename)
        path = contained_path(self.directory, f"upload-{new_id()}{suffix}")
        # Exclusive creation: a generated name never overwrites anything.
        self._handle = open(path, "xb")  # noqa: SIM115 - closed in on_part_end or close()
        self.upload = ReceivedUpload(path=path, size=0, suffix=suffix, client_name=client_name(filename))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        if not self._is_file:
            if len(self._text) + len(chunk) > MAX_FIELD_BYTES:
                raise UploadRejected(400, f'form field "{self._name}" is longer than {MAX_FIELD_BYTES} bytes')
            self._text.extend(chunk)
            return
        assert self.upload is not None and self._handle is not None
        self.upload.size += len(chunk)
        if self.upload.size > self.max_bytes:
            raise UploadRejected(413, f"upload larger than the limit of {self.max_bytes} bytes")
        # A local-disk write of one network chunk: cheap enough to do on the event loop.
        self._handle.write(chunk)

    def on_part_end(self) -> None:
        if self._is_file:
            self._close_file()
        else:
            self.fields[self._name] = self._decode(bytes(self._text))

    def on_end(self) -> None:
        self.finished = True

    @property
    def complete(self) -> bool:
        """The closing boundary arrived and the file part was closed."""
        return self.finished and self.upload is not None and self._handle is None

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode(self.charset)
        except UnicodeDecodeError:
            raise UploadRejected(400, f"a form field is not valid {self.charset}") from None

    def _close_file(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def abort(self) -> None:
        self._close_file()
        if self.upload is not None:
            self.upload.discard()


async def receive_upload(
    request: Request, directory: Path, max_bytes: int, file_field: str = "file"
) -> ReceivedUpload:
    """Stream the multipart body of `request` to a generated file in `directory`.

    Raises UploadRejected: 415 when the body is not multipart, 413 past `max_bytes`
    (checked against Content-Length first, then while streaming), 400 for a
    malformed body or a missing file. On any failure the partial file is removed.
    """
    content_type, params = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data":
        raise UploadRejected(415, "send the dataset as multipart/form-data with a file field named \"file\"")
    boundary = params.get(b"boundary")
    if not boundary:
        raise UploadRejected(400, "the multipart Content-Type has no boundary")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes + ENVELOPE_BYTES:
        raise UploadRejected(413, f"upload larger than the limit of {max_bytes} bytes")
    charset = params.get(b"charset", b"utf-8").decode("latin-1")
    try:
        charset = codecs.lookup(charset).name
    except LookupError:
        charset = "utf-8"

    directory.mkdir(parents=True, exist_ok=True)
    receiver = _StreamingReceiver(directory, file_field, max_bytes, charset)
    try:
        parser = MultipartParser(boundary, receiver.callbacks())  # type: ignore[arg-type]
        async for chunk in request.stream():
            parser.write(chunk)
        parser.finalize()
    except UploadRejected:
        receiver.abort()
        raise
    except FormParserError:
        receiver.abort()
        raise UploadRejected(400, "malformed multipart body") from None
    except BaseException:
        # A client that disconnects mid-upload must not leave a partial file behind.
        receiver.abort()
        raise
    upload = receiver.upload
    if upload is None or not receiver.complete:
        receiver.abort()
        raise UploadRejected(400, 'the multipart body is incomplete or has no file field "file"')
    upload.fields = receiver.fields
    with contextlib.suppress(OSError):
        upload.path.chmod(0o600)
    return upload
