"""Private scratch files beside the backup, and its encryption: sealing a tar into the backup file and back.

The plain tar only ever exists as a 0600 temporary file in the folder of the backup,
removed when the work ends, whether it succeeded or not.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from tunedeck.backup.contents import BACKUP_AAD, BackupError
from tunedeck.core.settings import setting_variable
from tunedeck.storage.encryption import Keyring, decrypt_stream, encrypt_stream

_TAR_MAGIC_OFFSET = 257
_TAR_MAGIC = b"ustar"
KEY_SETTING = setting_variable("encryption_key_file")


@contextmanager
def scratch_file(folder: Path, suffix: str) -> Iterator[Path]:
    """A new empty 0600 file in `folder`, removed when the block ends."""
    fd, name = tempfile.mkstemp(prefix=".tunedeck-backup-", suffix=suffix, dir=folder)
    os.close(fd)
    path = Path(name)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


@contextmanager
def scratch_folder(folder: Path) -> Iterator[Path]:
    """A new empty 0700 folder in `folder`, removed with its content when the block ends."""
    path = Path(tempfile.mkdtemp(prefix=".tunedeck-backup-", dir=folder))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def seal(plain_tar: Path, out: Path, keyring: Keyring | None) -> None:
    """Write `plain_tar` to `out` (a new file, 0600), encrypted with `keyring`; moved there when it is None.

    `out` appears whole or not at all: it is written beside itself and renamed at the end.
    """
    if keyring is None:
        _refuse_existing(out)
        os.replace(plain_tar, out)  # the tar is already a private file in the same folder
        return
    with scratch_file(out.parent, ".part") as partial:
        with open(plain_tar, "rb") as source, open(partial, "wb") as sink:
            encrypt_stream(keyring, source, sink, aad=BACKUP_AAD)
            _sync(sink)
        _refuse_existing(out)
        os.replace(partial, out)


def _refuse_existing(out: Path) -> None:
    if out.exists():
        raise BackupError(f"{out}: already exists; choose another --out")


@contextmanager
def unsealed(source: Path, keyring: Keyring | None, *, allow_unencrypted: bool = False) -> Iterator[Path]:
    """The plain tar of the backup at `source`.

    A plain tar is read where it is; an encrypted one is decrypted into a 0600 scratch
    file beside it (removed afterwards). BackupError when no key is configured for an
    encrypted backup, and when a key is configured but the backup is not encrypted (unless
    `allow_unencrypted`: only encryption proves the file is the one tunedeck wrote); the
    keyring's own error (naming `source`) for a wrong key or damage.
    """
    if not source.is_file():
        raise BackupError(f"{source}: no such backup file")
    if _is_plain_tar(source):
        if keyring is not None and not allow_unencrypted:
            raise BackupError(
                f"{source}: the backup is not encrypted although an encryption key is configured, so nothing "
                "proves it is unchanged (anyone able to write the file could add users, admins or tokens); "
                "restore it only if you made it and kept it safe: --allow-unencrypted"
            )
        yield source
        return
    if keyring is None:
        raise BackupError(f"{source}: the backup is encrypted and no key is configured: set {KEY_SETTING}")
    with scratch_file(source.parent, ".tar") as plain, open(source, "rb") as sealed, open(plain, "wb") as sink:
        decrypt_stream(keyring, sealed, sink, aad=BACKUP_AAD, what=str(source))
        sink.flush()
        yield plain


def _is_plain_tar(path: Path) -> bool:
    with open(path, "rb") as handle:
        head = handle.read(_TAR_MAGIC_OFFSET + len(_TAR_MAGIC))
    return head[_TAR_MAGIC_OFFSET:] == _TAR_MAGIC


def _sync(handle: BinaryIO) -> None:
    handle.flush()
    os.fsync(handle.fileno())
