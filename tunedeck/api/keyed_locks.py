"""One lock per key (an export's storage prefix), for work two requests must not do twice at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class KeyedLocks:
    """Locks made on first use of a key and dropped once nobody holds or waits for them."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold `key`'s lock for the block; another thread holding it makes this one wait."""
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users = self._locks[key][1] - 1
                if users:
                    self._locks[key] = (lock, users)
                else:
                    del self._locks[key]

    def __len__(self) -> int:
        """Keys held or waited for now."""
        with self._guard:
            return len(self._locks)
