"""Encryption keys checked before use: each key id must hold the secret that sealed the installation's data.

A key with a known id and other bytes (a key file copied from another machine, a key pasted
wrong) would let the server start, answer every read with a failure and seal new uploads
with a key nobody keeps. So each key's check value (a fingerprint that reveals nothing of
the secret) is recorded the first time a server or worker starts with it, and compared at
every start after: a mismatch refuses to start, with one line naming the key id.
`tunedeck keys status` shows each key's check and `/health` reports the storage unavailable
while a key does not match.
"""

from __future__ import annotations

from tunedeck.storage.encryption import Keyring
from tunedeck.storage.key_file import KEY_FILE_SETTING, EncryptionError
from tunedeck.store.store import JobStore

MATCHES = "matches"
NOT_RECORDED = "not recorded yet"
MISMATCH = "MISMATCH"


def verify_encryption_keys(jobs: JobStore, keyring: Keyring | None) -> None:
    """Record the check values of keys used for the first time; EncryptionError naming a key that does not match."""
    if keyring is None:
        return
    values = {key.id: key.check_value for key in keyring.keys}
    recorded = jobs.key_checks.record_new(values)
    wrong = [key_id for key_id, value in values.items() if recorded[key_id] != value]
    if wrong:
        raise mismatch_error(wrong[0])


def key_check_states(jobs: JobStore, keyring: Keyring | None) -> dict[str, str]:
    """Each key's check, without recording anything: MATCHES, MISMATCH or NOT_RECORDED."""
    if keyring is None:
        return {}
    recorded = jobs.key_checks.recorded(keyring.ids)
    return {
        key.id: NOT_RECORDED if key.id not in recorded else MATCHES if recorded[key.id] == key.check_value
        else MISMATCH
        for key in keyring.keys
    }  # fmt: skip


def mismatch_error(key_id: str) -> EncryptionError:
    """The one-line refusal for a key whose secret is not the one recorded under its id."""
    return EncryptionError(
        f"encryption key {key_id!r} is not the key this installation used under that id (its check value "
        f"differs from the one recorded when it was first used): put the right key in {KEY_FILE_SETTING}"
    )
