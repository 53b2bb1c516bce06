"""Key rotation: every stored object's data key re-sealed under the active key, without touching the data.

Objects still stored unencrypted (written before encryption was turned on) are encrypted
on the way. Each object is handled on its own and one already under the active key is
skipped, so a rotation that stops half-way is finished by running it again.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tunedeck.core.errors import StorageError
from tunedeck.storage.base import ArtifactStore
from tunedeck.storage.committing import ManifestedStore
from tunedeck.storage.encryption import Keyring

# Told `(objects_done, objects_total, key)` after each object.
RotationProgress = Callable[[int, int, str], None]
PLAINTEXT = "(unencrypted)"


@dataclass(frozen=True)
class RotationReport:
    """What a rotation did: data keys re-sealed, plaintext objects encrypted, objects already current."""

    active_key: str
    rewrapped: int
    encrypted: int
    already_current: int

    @property
    def total(self) -> int:
        """Every object the rotation looked at."""
        return self.rewrapped + self.encrypted + self.already_current


def _encrypting_store(store: ArtifactStore, keyring: Keyring) -> ManifestedStore:
    if not isinstance(store, ManifestedStore):
        raise StorageError(f"{store!r} does not support encryption")
    if store.keyring != keyring:
        raise StorageError("the store must be opened with the keyring it is rotated to")
    return store


def rotate_keys(
    store: ArtifactStore, keyring: Keyring, *, on_progress: RotationProgress | None = None
) -> RotationReport:
    """Bring every object of `store` under the active key of `keyring` (the keyring `store` was opened with).

    Encrypted objects under an older key get their envelope re-sealed (local: the header
    rewritten in place; S3: the object copied onto itself with new metadata); plaintext
    objects are encrypted (rewritten). EncryptionError when an object's key is not in
    the keyring; the objects done so far stay done.
    """
    target = _encrypting_store(store, keyring)
    keys = target.list("")
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="tunedeck-rotate-") as scratch:
        for done, key in enumerate(keys, start=1):
            envelope = target._stored_envelope(key)
            if envelope is None:
                plain = Path(scratch) / "object"
                target._fetch_raw_to(key, plain)
                target.put_file(key, plain)
                plain.unlink()
                counts["encrypted"] += 1
            elif envelope.kek_id == keyring.active.id:
                counts["current"] += 1
            else:
                target._replace_envelope(key, keyring.reseal(envelope, what=key))
                counts["rewrapped"] += 1
            if on_progress is not None:
                on_progress(done, len(keys), key)
    return RotationReport(keyring.active.id, counts["rewrapped"], counts["encrypted"], counts["current"])


def key_usage(store: ArtifactStore) -> dict[str, int]:
    """How many objects each key id seals (`PLAINTEXT` counts unencrypted ones); reads envelopes only."""
    if not isinstance(store, ManifestedStore):
        raise StorageError(f"{store!r} does not support encryption")
    usage: Counter[str] = Counter()
    for key in store.list(""):
        envelope = store._stored_envelope(key)
        usage[PLAINTEXT if envelope is None else envelope.kek_id] += 1
    return dict(sorted(usage.items()))
