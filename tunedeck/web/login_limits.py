"""How many failed sign-ins the dashboard takes: per address, and from all addresses together, per minute.

API tokens are 32 random bytes, so guessing one is out of reach; the limits keep a client
from making the server hash and look up tokens without end, and make a probe visible. They
are kept in memory, per server process.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

PER_ADDRESS = 10  # failed sign-ins one address may make in a window
OVERALL = 100  # failed sign-ins all addresses together may make in a window
WINDOW_S = 60.0
_MAX_ADDRESSES = 10_000  # addresses remembered at most: memory stays bounded whatever the traffic


@dataclass
class LoginLimiter:
    """Failed sign-ins in a sliding window, per address and overall."""

    per_address: int = PER_ADDRESS
    overall: int = OVERALL
    window_s: float = WINDOW_S
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, deque[float]] = field(default_factory=dict)
    _all: deque[float] = field(default_factory=deque)

    def wait_seconds(self, address: str) -> int:
        """Seconds before `address` may try again; 0 when it may now."""
        now = self.clock()
        self._forget(now)
        waits = []
        mine = self._failures.get(address)
        if mine is not None and len(mine) >= self.per_address:
            waits.append(mine[0] + self.window_s - now)
        if len(self._all) >= self.overall:
            waits.append(self._all[0] + self.window_s - now)
        return max(1, int(max(waits)) + 1) if waits else 0

    def failed(self, address: str) -> None:
        """Count one failed sign-in from `address`."""
        now = self.clock()
        self._forget(now)
        if address not in self._failures and len(self._failures) >= _MAX_ADDRESSES:
            self._failures.pop(next(iter(self._failures)))  # the address seen longest ago goes first
        self._failures.setdefault(address, deque()).append(now)
        self._all.append(now)

    def _forget(self, now: float) -> None:
        horizon = now - self.window_s
        while self._all and self._all[0] <= horizon:
            self._all.popleft()
        for address in [key for key, times in self._failures.items() if times and times[-1] <= horizon]:
            del self._failures[address]
        for times in self._failures.values():
            while times and times[0] <= horizon:
                times.popleft()
