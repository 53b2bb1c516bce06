"""Key-encryption keys and the key file that holds them (`TUNEDECK_ENCRYPTION_KEY_FILE`).

One `id:base64key` a line (32-byte keys), `#` starts a comment, the last key is the
active one. The file must be private to its owner: tunedeck refuses one that other
users may read, and creates it 0600 in a 0700 folder.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tunedeck.core.errors import StorageError
from tunedeck.core.settings import setting_variable

KEY_BYTES = 32
KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,16}$")
KEY_FILE_SETTING = setting_variable("encryption_key_file")
KEYS_SETTING = setting_variable("encryption_keys")


class EncryptionError(StorageError):
    """An encrypted object cannot be written or read: wrong or missing key, damage, tampering."""


@dataclass(frozen=True)
class KeyEncryptionKey:
    """One key-encryption key: a short id (kept beside every envelope it seals) and 32 secret bytes."""

    id: str
    secret: bytes = field(repr=False)

    @property
    def check_value(self) -> str:
        """A fingerprint of the secret that reveals nothing of it (an HMAC of a fixed text), recorded on first
        use so that a different secret under the same id is recognised before it reads or seals anything."""
        return hmac.new(self.secret, b"tunedeck key check value", hashlib.sha256).hexdigest()[:32]


def check_key_id(key_id: str) -> str:
    """`key_id`, or EncryptionError when it is not 1 to 16 letters, digits, '.', '_' or '-'."""
    if not KEY_ID.match(key_id):
        raise EncryptionError(f"encryption key id {key_id!r}: use 1 to 16 letters, digits, '.', '_' or '-'")
    return key_id


def parse_keys(text: str, *, source: str, separator: str = "\n") -> list[KeyEncryptionKey]:
    """Keys from `id:base64` entries split by `separator`; blank entries and (per line) `#` comments skipped."""
    keys = []
    for number, raw in enumerate(text.split(separator), start=1):
        entry = raw.split("#", 1)[0].strip() if separator == "\n" else raw.strip()
        if not entry:
            continue
        where = f"{source} line {number}" if separator == "\n" else f"{source} entry {number}"
        key_id, colon, encoded = entry.partition(":")
        if not colon:
            raise EncryptionError(f"{where}: expected `id:base64key`")
        try:
            secret = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise EncryptionError(f"{where}: the key after {key_id.strip()!r}: is not valid base64") from None
        if len(secret) != KEY_BYTES:
            raise EncryptionError(f"{where}: key {key_id.strip()!r} is {len(secret)} bytes; expected {KEY_BYTES}")
        keys.append(KeyEncryptionKey(key_id.strip(), secret))
    if not keys:
        raise EncryptionError(f"{source}: no encryption key in it")
    return keys


def read_key_file(path: Path) -> list[KeyEncryptionKey]:
    """The keys of a key file, refused when its group or other users have any access to it."""
    if path.is_dir():
        raise EncryptionError(f"{path} is a folder; {KEY_FILE_SETTING} must name the key file itself")
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise EncryptionError(
                f"{path}: the encryption key file is accessible to other users (mode {stat.S_IMODE(mode):04o}); "
                f"run `chmod 600 {path}`"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise EncryptionError(f"cannot read the encryption key file {path}: {error.strerror}") from None
    return parse_keys(text, source=str(path))


def generate_key_line(key_id: str) -> str:
    """A new `id:base64key` line for a key file (32 random bytes)."""
    return f"{check_key_id(key_id)}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode('ascii')}"


def write_key_file_line(path: Path, line: str) -> None:
    """Append `line` to a key file, creating it (and its folder) private: 0600 file, 0700 folder."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    needs_newline = path.is_file() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
        handle.write(("\n" if needs_newline else "") + line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    path.chmod(0o600)
