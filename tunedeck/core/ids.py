"""Identifiers: random, URL-safe and sortable by creation time."""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def _encode(number: int, length: int) -> str:
    chars = []
    for _ in range(length):
        number, rest = divmod(number, 32)
        chars.append(_ALPHABET[rest])
    return "".join(reversed(chars))


def new_id(prefix: str = "") -> str:
    """A 26-character id: 10 characters of milliseconds, then 16 random ones.

    Time first so that ids sort in creation order (FIFO queues and listings rely
    on it); randomness after so they cannot be guessed.
    """
    stamp = _encode(int(time.time() * 1000), 10)
    rand = _encode(secrets.randbits(80), 16)
    return f"{prefix}{stamp}{rand}"


def new_token(nbytes: int = 32) -> str:
    """A random secret for API tokens and fencing tokens."""
    return secrets.token_urlsafe(nbytes)
