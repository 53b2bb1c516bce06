"""The encrypted object format: round trips at chunk boundaries, and every kind of damage refused."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest
from pydantic import SecretStr

from tunedeck.core.errors import StorageError
from tunedeck.core.settings import Settings
from tunedeck.storage.encryption import (
    HEADER_SIZE,
    MAGIC,
    DataKey,
    EncryptingReader,
    EncryptionError,
    Envelope,
    Keyring,
    decrypt_chunks,
    decrypt_stream,
    encrypt_chunks,
    encrypt_stream,
    header_bytes,
)
from tunedeck.storage.key_file import generate_key_line, write_key_file_line

CHUNK = 64
_TAG = 16


def _keyring(*ids: str) -> Keyring:
    return Keyring.parse("\n".join(generate_key_line(i) for i in ids), source="test keys")


def _sealed(keyring: Keyring, data: bytes) -> tuple[bytes, bytes]:
    """(envelope header, chunk ciphertext) of `data` with small chunks."""
    data_key = DataKey.new(CHUNK)
    body = io.BytesIO()
    encrypt_chunks(data_key, io.BytesIO(data), body)
    return header_bytes(keyring.seal(data_key, len(data), hashlib.sha256(data).hexdigest())), body.getvalue()


def _open(keyring: Keyring, header: bytes, body: bytes) -> bytes:
    out = io.BytesIO()
    decrypt_stream(keyring, io.BytesIO(header + body), out, what="users/u/obj.bin")
    return out.getvalue()


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK])
def test_round_trip_at_chunk_boundaries(size: int) -> None:
    keyring = _keyring("k1")
    data = os.urandom(size)
    header, body = _sealed(keyring, data)
    assert _open(keyring, header, body) == data
    assert len(body) == size + max(1, -(-size // CHUNK)) * _TAG  # an empty object is one empty sealed chunk


def test_encrypt_stream_round_trip_with_unseekable_sink_and_aad() -> None:
    keyring = _keyring("k1")
    data = os.urandom(5000)

    class Unseekable(io.BytesIO):
        def seekable(self) -> bool:
            return False

    sink = Unseekable()
    encrypt_stream(keyring, io.BytesIO(data), sink, aad=b"backup-1")
    assert data not in sink.getvalue()
    out = io.BytesIO()
    decrypt_stream(keyring, io.BytesIO(sink.getvalue()), out, aad=b"backup-1")
    assert out.getvalue() == data
    with pytest.raises(EncryptionError, match="fails authentication"):
        decrypt_stream(keyring, io.BytesIO(sink.getvalue()), io.BytesIO(), aad=b"backup-2")


def test_encrypting_reader_gives_the_same_chunks_as_encrypt_chunks() -> None:
    data_key = DataKey.new(CHUNK)
    data = os.urandom(3 * CHUNK + 5)
    written = io.BytesIO()
    encrypt_chunks(data_key, io.BytesIO(data), written)
    reader = EncryptingReader(data_key, io.BytesIO(data))
    streamed = b"".join(iter(lambda: reader.read(7), b""))
    assert streamed == written.getvalue()


def test_tampered_byte_in_body_is_refused() -> None:
    keyring = _keyring("k1")
    header, body = _sealed(keyring, b"x" * (2 * CHUNK + 3))
    damaged = bytearray(body)
    damaged[CHUNK + 20] ^= 0x01
    with pytest.raises(EncryptionError, match=r"^users/u/obj\.bin: encrypted object fails authentication"):
        _open(keyring, header, bytes(damaged))


def test_truncated_object_is_refused_even_at_a_chunk_boundary() -> None:
    keyring = _keyring("k1")
    header, body = _sealed(keyring, os.urandom(3 * CHUNK))
    record = CHUNK + _TAG
    for cut in (len(body) - 1, 2 * record, record, 0):
        with pytest.raises(EncryptionError, match="fails authentication"):
            _open(keyring, header, body[:cut])


def test_swapped_or_extended_chunks_are_refused() -> None:
    keyring = _keyring("k1")
    header, body = _sealed(keyring, os.urandom(3 * CHUNK))
    record = CHUNK + _TAG
    first, second, third = body[:record], body[record : 2 * record], body[2 * record :]
    with pytest.raises(EncryptionError, match="fails authentication"):
        _open(keyring, header, second + first + third)
    with pytest.raises(EncryptionError, match="fails authentication"):
        _open(keyring, header, body + first)


def test_tampered_envelope_is_refused() -> None:
    keyring = _keyring("k1")
    header, body = _sealed(keyring, b"hello")
    damaged = bytearray(header)
    damaged[-1] ^= 0x01
    with pytest.raises(EncryptionError, match="fails authentication"):
        _open(keyring, bytes(damaged), body)


def test_unknown_key_id_is_named() -> None:
    header, body = _sealed(_keyring("old-key"), b"secret")
    with pytest.raises(EncryptionError, match=r"encrypted with key 'old-key'.*add that key to the key file"):
        _open(_keyring("new-key"), header, body)


def test_plaintext_is_not_decrypted() -> None:
    with pytest.raises(EncryptionError, match="not an encrypted tunedeck file"):
        decrypt_stream(_keyring("k1"), io.BytesIO(b"plain text" * 20), io.BytesIO())


def test_reseal_keeps_the_data_key_and_the_new_key_alone_reads_it() -> None:
    old, new = _keyring("k1"), _keyring("k2")
    both = Keyring([old.active, new.active])
    header, body = _sealed(old, b"payload" * 30)
    envelope = both.reseal(Envelope.from_bytes(header[len(MAGIC) :], what="o"), what="o")
    assert envelope.kek_id == "k2" and len(header_bytes(envelope)) == HEADER_SIZE
    opened = new.open(envelope, what="o")
    out = io.BytesIO()
    decrypt_chunks(opened, io.BytesIO(body), out, what="o")
    assert out.getvalue() == b"payload" * 30


def test_key_file_rules(tmp_path: Path) -> None:
    key_file = tmp_path / "keys" / "tunedeck.keys"
    write_key_file_line(key_file, generate_key_line("first"))
    write_key_file_line(key_file, generate_key_line("second"))
    assert key_file.stat().st_mode & 0o777 == 0o600
    key_file.write_text("# keys\n" + key_file.read_text() + "\n")
    key_file.chmod(0o600)
    keyring = Keyring.from_settings(Settings(encryption_key_file=key_file))  # type: ignore[call-arg]
    assert keyring is not None and keyring.ids == ["first", "second"] and keyring.active.id == "second"
    key_file.chmod(0o640)
    with pytest.raises(EncryptionError, match=r"accessible to other users \(mode 0640\).*chmod 600"):
        Keyring.from_file(key_file)
    with pytest.raises(EncryptionError, match="is a folder; TUNEDECK_ENCRYPTION_KEY_FILE must name the key file"):
        Keyring.from_file(tmp_path)


def test_keys_from_the_environment_value_and_bad_entries() -> None:
    value = f"{generate_key_line('a')},{generate_key_line('b')}"
    settings = Settings(encryption_keys=SecretStr(value))  # type: ignore[call-arg]
    assert "a:" not in repr(settings)
    keyring = Keyring.from_settings(settings)
    assert keyring is not None and keyring.active.id == "b"
    assert Keyring.from_settings(Settings()) is None  # type: ignore[call-arg]
    with pytest.raises(EncryptionError, match="entry 1: key 'short' is 3 bytes; expected 32"):
        Keyring.parse("short:YWJj", source="TUNEDECK_ENCRYPTION_KEYS", separator=",")
    with pytest.raises(EncryptionError, match="line 2: expected `id:base64key`"):
        Keyring.parse(generate_key_line("a") + "\nnot-a-key\n", source="keys")
    with pytest.raises(EncryptionError, match="listed twice"):
        Keyring.parse(generate_key_line("a") + "\n" + generate_key_line("a"), source="keys")
    assert issubclass(EncryptionError, StorageError)
