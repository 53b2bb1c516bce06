"""Client-side envelope encryption of stored objects (AES-256-GCM), streamed chunk by chunk.

Each object gets a fresh random data key. The plaintext is cut into chunks (4 MiB by
default), each sealed with AES-256-GCM under a nonce made of a random 8-byte prefix and
the chunk's 4-byte counter; the final chunk's associated data marks it "last", so a
truncated, reordered or extended object fails authentication instead of decrypting to
something shorter or longer. The data key, the chunk parameters, the plaintext size and
its sha256 are sealed together under a key-encryption key of the `Keyring` into an
`Envelope`. Rotation re-seals only the envelope; the chunks never change.

A backend keeps the envelope where it fits: the local folder as a fixed-length header at
the start of the file (`HEADER_SIZE` bytes, rewritten in place on rotation), S3 in the
object's user metadata. `encrypt_stream` / `decrypt_stream` write and read the
self-contained form (header + chunks) for standalone files such as backups.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import secrets
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tunedeck.storage.key_file import (
    KEY_BYTES,
    KEY_FILE_SETTING,
    KEY_ID,
    KEYS_SETTING,
    EncryptionError,
    KeyEncryptionKey,
    check_key_id,
    parse_keys,
    read_key_file,
)

if TYPE_CHECKING:
    from tunedeck.core.settings import Settings

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
MAGIC = b"TDENC\x00\x01\n"  # starts every file in the self-contained form; the last byte pair is the version
FORMAT_VERSION = 1
_TAG = 16
_ID_BYTES = 16
_WRAP_NONCE = 12
_NONCE_PREFIX = 8
_MAX_CHUNKS = 2**32
# Sealed inside the envelope: data key, nonce prefix, chunk size, plaintext size, plaintext sha256.
_SEALED = struct.Struct(f">{KEY_BYTES}s{_NONCE_PREFIX}sIQ32s")
ENVELOPE_SIZE = _ID_BYTES + _WRAP_NONCE + _SEALED.size + _TAG
HEADER_SIZE = len(MAGIC) + ENVELOPE_SIZE


def authentication_failed(what: str) -> EncryptionError:
    """The error for ciphertext that does not authenticate: never decrypted to garbage."""
    return EncryptionError(f"{what}: encrypted object fails authentication (damaged or tampered); refusing it")


def no_keyring_error(what: str) -> EncryptionError:
    """The error for an encrypted object read by a process without keys."""
    return EncryptionError(
        f"{what}: the object is encrypted but no encryption key is configured; "
        f"set {KEY_FILE_SETTING} to the key file it was written with"
    )


def plaintext_refused_error(what: str) -> EncryptionError:
    """The error for an unencrypted object read while encryption is on."""
    return EncryptionError(
        f"{what}: stored unencrypted while encryption is configured; refusing it. "
        "Run `tunedeck keys rotate` to encrypt every object stored before encryption was turned on"
    )


@dataclass(frozen=True)
class DataKey:
    """The per-object data key and chunk parameters."""

    secret: bytes = field(repr=False)
    nonce_prefix: bytes
    chunk_size: int

    @classmethod
    def new(cls, chunk_size: int = DEFAULT_CHUNK_SIZE) -> DataKey:
        """A fresh random data key for one object."""
        if not 1 <= chunk_size < 2**32 - _TAG:
            raise EncryptionError(f"encryption chunk size must be between 1 byte and 4 GiB, got {chunk_size}")
        return cls(secrets.token_bytes(KEY_BYTES), secrets.token_bytes(_NONCE_PREFIX), chunk_size)


@dataclass(frozen=True)
class Envelope:
    """A data key (with the plaintext's size and sha256) sealed under the key-encryption key `kek_id`."""

    kek_id: str
    nonce: bytes
    wrapped: bytes

    def to_bytes(self) -> bytes:
        """Fixed-length form (`ENVELOPE_SIZE` bytes), so a header can be rewritten in place."""
        return self.kek_id.encode("ascii").ljust(_ID_BYTES, b"\x00") + self.nonce + self.wrapped

    @classmethod
    def from_bytes(cls, data: bytes, *, what: str) -> Envelope:
        """Parse `to_bytes` output; EncryptionError when it is not an envelope."""
        if len(data) != ENVELOPE_SIZE:
            raise authentication_failed(what)
        kek_id = data[:_ID_BYTES].rstrip(b"\x00").decode("ascii", errors="replace")
        if not KEY_ID.match(kek_id):
            raise authentication_failed(what)
        return cls(kek_id, data[_ID_BYTES : _ID_BYTES + _WRAP_NONCE], data[_ID_BYTES + _WRAP_NONCE :])

    def to_text(self) -> str:
        """Base64 form, for object metadata."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @classmethod
    def from_text(cls, text: str, *, what: str) -> Envelope:
        """Parse `to_text` output; EncryptionError when it is not an envelope."""
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise authentication_failed(what) from None
        return cls.from_bytes(data, what=what)


@dataclass(frozen=True)
class OpenedEnvelope:
    """What an envelope seals: the data key and the plaintext's size and sha256 (hex)."""

    kek_id: str
    data_key: DataKey
    size: int
    sha256: str


def _envelope_aad(kek_id: str) -> bytes:
    return f"tunedeck.envelope/{FORMAT_VERSION}/{kek_id}".encode("ascii")


class Keyring:
    """Key-encryption keys in order; the last is the active one, older ones only read (until rotated away)."""

    def __init__(self, keys: list[KeyEncryptionKey]) -> None:
        if not keys:
            raise EncryptionError("an encryption keyring needs at least one key")
        by_id: dict[str, KeyEncryptionKey] = {}
        for key in keys:
            check_key_id(key.id)
            if len(key.secret) != KEY_BYTES:
                raise EncryptionError(f"encryption key {key.id!r}: expected {KEY_BYTES} bytes, got {len(key.secret)}")
            if key.id in by_id:
                raise EncryptionError(f"encryption key id {key.id!r} is listed twice")
            by_id[key.id] = key
        self._keys = by_id
        self.active = keys[-1]

    def __repr__(self) -> str:
        return f"Keyring(ids={self.ids!r}, active={self.active.id!r})"

    def __eq__(self, other: object) -> bool:
        """The same keys in the same order (two loads of one key file are equal)."""
        return isinstance(other, Keyring) and list(self._keys.values()) == list(other._keys.values())

    __hash__ = None  # type: ignore[assignment]  # compared by their keys, so not hashable by identity

    @property
    def ids(self) -> list[str]:
        """Every key id, oldest first."""
        return list(self._keys)

    @property
    def keys(self) -> list[KeyEncryptionKey]:
        """Every key, oldest first."""
        return list(self._keys.values())

    def seal(self, data_key: DataKey, size: int, sha256: str) -> Envelope:
        """Seal a data key with the active key."""
        nonce = secrets.token_bytes(_WRAP_NONCE)
        sealed = _SEALED.pack(data_key.secret, data_key.nonce_prefix, data_key.chunk_size, size, bytes.fromhex(sha256))
        wrapped = AESGCM(self.active.secret).encrypt(nonce, sealed, _envelope_aad(self.active.id))
        return Envelope(self.active.id, nonce, wrapped)

    def open(self, envelope: Envelope, *, what: str) -> OpenedEnvelope:
        """Unseal an envelope; EncryptionError naming the key id when this keyring lacks it."""
        kek = self._keys.get(envelope.kek_id)
        if kek is None:
            raise EncryptionError(
                f"{what}: encrypted with key {envelope.kek_id!r}, which is not in the keyring; "
                f"add that key to the key file ({KEY_FILE_SETTING})"
            )
        try:
            sealed = AESGCM(kek.secret).decrypt(envelope.nonce, envelope.wrapped, _envelope_aad(kek.id))
        except InvalidTag:
            raise authentication_failed(what) from None
        secret, prefix, chunk_size, size, digest = _SEALED.unpack(sealed)
        return OpenedEnvelope(kek.id, DataKey(secret, prefix, chunk_size), size, digest.hex())

    def reseal(self, envelope: Envelope, *, what: str) -> Envelope:
        """The same data key and plaintext facts sealed under the active key (the data is not touched)."""
        opened = self.open(envelope, what=what)
        return self.seal(opened.data_key, opened.size, opened.sha256)

    # -- loading -------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str, *, source: str, separator: str = "\n") -> Keyring:
        """Keys from `id:base64` entries split by `separator` (see `parse_keys`)."""
        return cls(parse_keys(text, source=source, separator=separator))

    @classmethod
    def from_file(cls, path: Path) -> Keyring:
        """Keys from a key file, refused when anyone but its owner may use it."""
        return cls(read_key_file(path))

    @classmethod
    def from_settings(cls, settings: Settings) -> Keyring | None:
        """The keyring configured by `TUNEDECK_ENCRYPTION_KEY_FILE` or `TUNEDECK_ENCRYPTION_KEYS`, else None."""
        if settings.encryption_key_file is not None and settings.encryption_keys is not None:
            raise EncryptionError(f"set only one of {KEY_FILE_SETTING} and {KEYS_SETTING}")
        if settings.encryption_key_file is not None:
            return cls.from_file(Path(settings.encryption_key_file).expanduser())
        if settings.encryption_keys is not None:
            return cls.parse(settings.encryption_keys.get_secret_value(), source=KEYS_SETTING, separator=",")
        return None


# -- chunks --------------------------------------------------------------------------


def _nonce(data_key: DataKey, counter: int) -> bytes:
    if counter >= _MAX_CHUNKS:
        raise EncryptionError("object too large to encrypt with this chunk size")
    return data_key.nonce_prefix + counter.to_bytes(4, "big")


def _chunk_aad(last: bool, aad: bytes) -> bytes:
    return b"tunedeck.chunk/1" + (b"\x01" if last else b"\x00") + aad


def _read_exact(source: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes, fewer only at the end of `source` (network bodies return short reads)."""
    buffer = bytearray(size)
    return bytes(memoryview(buffer)[: _fill(source, buffer)])


def _fill(source: BinaryIO, buffer: bytearray) -> int:
    """Fill `buffer` from `source` (fewer bytes only at its end); returns how many bytes were read."""
    view = memoryview(buffer)
    readinto = getattr(source, "readinto", None)
    filled = 0
    while filled < len(buffer):
        if readinto is not None:
            got = readinto(view[filled:]) or 0
        else:
            data = source.read(len(buffer) - filled)
            got = len(data)
            view[filled : filled + got] = data
        if not got:
            break
        filled += got
    return filled


def ciphertext_chunks(data_key: DataKey, source: BinaryIO, *, aad: bytes = b"") -> Iterator[memoryview]:
    """The sealed chunks of `source`, one at a time (two plaintext chunks in memory at most).

    Each chunk is a view of a buffer reused for the next one (no allocation per chunk, which
    costs as much as the cipher at these sizes): use or copy it before asking for the next.
    """
    cipher = AESGCM(data_key.secret)
    size = data_key.chunk_size
    current, following, sealed = bytearray(size), bytearray(size), bytearray(size + _TAG)
    filled = _fill(source, current)
    counter = 0
    while True:
        ahead = _fill(source, following) if filled == size else 0
        last = ahead == 0
        out = memoryview(sealed)[: filled + _TAG]
        cipher.encrypt_into(_nonce(data_key, counter), memoryview(current)[:filled], _chunk_aad(last, aad), out)
        yield out
        if last:
            return
        current, following, filled, counter = following, current, ahead, counter + 1


def plaintext_chunks(data_key: DataKey, source: BinaryIO, *, aad: bytes = b"", what: str) -> Iterator[memoryview]:
    """The authenticated plaintext of each chunk of `source`; EncryptionError at the first bad one.

    As for `ciphertext_chunks`, each chunk is a view of a reused buffer, valid until the next.
    """
    cipher = AESGCM(data_key.secret)
    record = data_key.chunk_size + _TAG
    current, following, plain = bytearray(record), bytearray(record), bytearray(data_key.chunk_size)
    filled = _fill(source, current)
    counter = 0
    while True:
        ahead = _fill(source, following) if filled == record else 0
        last = ahead == 0
        if filled < _TAG:
            raise authentication_failed(what)
        out = memoryview(plain)[: filled - _TAG]
        try:
            # On failure `out` may hold unverified bytes: it is never handed out.
            cipher.decrypt_into(_nonce(data_key, counter), memoryview(current)[:filled], _chunk_aad(last, aad), out)
        except (InvalidTag, ValueError):
            raise authentication_failed(what) from None
        yield out
        if last:
            return
        current, following, filled, counter = following, current, ahead, counter + 1


def encrypt_chunks(data_key: DataKey, source: BinaryIO, sink: BinaryIO, *, aad: bytes = b"") -> int:
    """Write the sealed chunks of `source` to `sink`; returns the plaintext bytes read."""
    size = 0
    for chunk in ciphertext_chunks(data_key, source, aad=aad):
        size += len(chunk) - _TAG
        sink.write(chunk)
    return size


def decrypt_chunks(
    opened: OpenedEnvelope, source: BinaryIO, sink: BinaryIO, *, aad: bytes = b"", what: str, check_sha256: bool = True
) -> None:
    """Write the plaintext of `source` to `sink`, checking it has the envelope's size (and sha256)."""
    size = 0
    digest = hashlib.sha256() if check_sha256 else None
    for chunk in plaintext_chunks(opened.data_key, source, aad=aad, what=what):
        size += len(chunk)
        if digest is not None:
            digest.update(chunk)
        sink.write(chunk)
    if size != opened.size or (digest is not None and digest.hexdigest() != opened.sha256):
        raise authentication_failed(what)


class EncryptingReader(io.RawIOBase):
    """A read-only, unseekable file whose bytes are the sealed chunks of `source` (for streaming uploads)."""

    def __init__(self, data_key: DataKey, source: BinaryIO, *, aad: bytes = b"") -> None:
        super().__init__()
        self._chunks = ciphertext_chunks(data_key, source, aad=aad)
        self._buffer = memoryview(b"")
        self._offset = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        """Exactly `size` bytes unless the end comes first.

        The S3 transfer manager reads once to decide on a multipart upload: a short read
        would make it send the whole object in one PUT, read into memory.
        """
        if size is None or size < 0:
            return self.readall()
        return _read_exact(self, size)  # type: ignore[arg-type]

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while self._offset >= len(self._buffer):
            next_chunk = next(self._chunks, None)
            if next_chunk is None:
                return 0
            self._buffer, self._offset = next_chunk, 0
        count = min(len(buffer), len(self._buffer) - self._offset)
        buffer[:count] = self._buffer[self._offset : self._offset + count]
        self._offset += count
        return count


# -- the self-contained form: header (magic + envelope) then chunks ------------------------


def header_bytes(envelope: Envelope) -> bytes:
    """The fixed-length header that starts a self-contained encrypted file."""
    return MAGIC + envelope.to_bytes()


def read_header(source: BinaryIO, *, what: str) -> Envelope | None:
    """The envelope at the start of `source`, or None when `source` does not start with one (plaintext)."""
    head = _read_exact(source, HEADER_SIZE)
    if not head.startswith(MAGIC):
        return None
    return Envelope.from_bytes(head[len(MAGIC) :], what=what)


class _HashingReader:
    """Passes reads through, counting and hashing them."""

    def __init__(self, source: BinaryIO) -> None:
        self.source, self.digest, self.size = source, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.digest.update(data)
        self.size += len(data)
        return data


def encrypt_stream(keyring: Keyring, source: BinaryIO, sink: BinaryIO, *, aad: bytes = b"") -> None:
    """Encrypt `source` into `sink` in the self-contained form (header, then chunks), chunk by chunk.

    The header records the plaintext's size and sha256, known only at the end: a seekable
    `sink` gets it written last at its start; otherwise `source` must be seekable and is
    read twice (once to hash it).
    """
    data_key = DataKey.new()
    if sink.seekable():
        start = sink.tell()
        sink.write(b"\x00" * HEADER_SIZE)
        hashing = _HashingReader(source)
        encrypt_chunks(data_key, hashing, sink, aad=aad)  # type: ignore[arg-type]
        end = sink.tell()
        sink.seek(start)
        sink.write(header_bytes(keyring.seal(data_key, hashing.size, hashing.digest.hexdigest())))
        sink.seek(end)
        return
    if not source.seekable():
        raise EncryptionError("encrypting a stream needs a seekable source or a seekable destination")
    start = source.tell()
    hashing = _HashingReader(source)
    while _read_exact(hashing, DEFAULT_CHUNK_SIZE):  # type: ignore[arg-type]
        pass
    source.seek(start)
    sink.write(header_bytes(keyring.seal(data_key, hashing.size, hashing.digest.hexdigest())))
    encrypt_chunks(data_key, source, sink, aad=aad)


def decrypt_stream(keyring: Keyring, source: BinaryIO, sink: BinaryIO, *, aad: bytes = b"", what: str = "") -> None:
    """Decrypt the self-contained form from `source` into `sink`, chunk by chunk, checking size and sha256.

    `what` names the object in errors. Nothing unauthenticated is written: a bad chunk stops
    the stream with EncryptionError (the caller discards what `sink` got so far).
    """
    label = what or "encrypted stream"
    envelope = read_header(source, what=label)
    if envelope is None:
        raise EncryptionError(f"{label}: not an encrypted tunedeck file (no encryption header)")
    decrypt_chunks(keyring.open(envelope, what=label), source, sink, aad=aad, what=label)


def open_stored(keyring: Keyring | None, envelope: Envelope | None, *, what: str) -> OpenedEnvelope | None:
    """The opened envelope of a stored object, or None for a plaintext one a store without keys may read.

    Raises EncryptionError for every mismatch between the object and the store's keys:
    plaintext while encryption is on, encrypted with no keys, or a key the keyring lacks.
    """
    if envelope is None:
        if keyring is not None:
            raise plaintext_refused_error(what)
        return None
    if keyring is None:
        raise no_keyring_error(what)
    return keyring.open(envelope, what=what)
