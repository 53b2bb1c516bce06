"""A bound on the model processes the API starts (generation, export, preflight, inspection).

Each such process loads a model: without a bound, a few users' concurrent requests hold
gigabytes and every route slows down. A request that would exceed the server's total or
its user's share is answered at once with 429 and a Retry-After, never queued behind the
others on the API's threads.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

RETRY_AFTER_S = 10


class EngineSlotsFull(Exception):
    """No slot is free for this request: too many model processes overall, or for this user."""

    def __init__(self, detail: str, retry_after_s: int = RETRY_AFTER_S) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retry_after_s = retry_after_s


class EngineSlots:
    """Counts the model processes running for each user and in all, within one API process."""

    def __init__(self, total: int, per_user: int) -> None:
        self.total = total
        self.per_user = per_user
        self._lock = threading.Lock()
        self._by_user: Counter[str] = Counter()

    @contextmanager
    def hold(self, user_id: str, what: str) -> Iterator[None]:
        """Hold a slot for one model process of `user_id` while the block runs; EngineSlotsFull when none is free."""
        with self._lock:
            running = sum(self._by_user.values())
            if self._by_user[user_id] >= self.per_user:
                raise EngineSlotsFull(
                    f"{what}: you already have {self._by_user[user_id]} model process(es) running "
                    f"(at most {self.per_user} per user); retry when it ends"
                )
            if running >= self.total:
                raise EngineSlotsFull(
                    f"{what}: the server is running {running} model processes, the most it runs at once; retry shortly"
                )
            self._by_user[user_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._by_user[user_id] -= 1
                if self._by_user[user_id] <= 0:
                    del self._by_user[user_id]

    def running(self) -> int:
        """How many model processes hold a slot now."""
        with self._lock:
            return sum(self._by_user.values())
