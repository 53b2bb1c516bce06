"""A least-recently-used cache bounded by bytes, not by count: what a long-lived process keeps loaded.

Each entry declares its size when stored. Storing one that would pass the budget first
evicts the least recently used entries until it fits; an entry larger than the whole
budget is not kept at all (and evicts nothing, since dropping the others would not make
room). Reading an entry makes it the most recently used. Not thread-safe: its one user
(the generation process) answers one request at a time.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class Stored:
    """What storing an entry did: whether it was kept, and the keys evicted to make room."""

    kept: bool
    evicted: list[str] = field(default_factory=list)


class ByteBudgetCache(Generic[V]):
    """Entries by key, least recently used first out, their sizes summing to at most `budget_bytes`."""

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ValueError(f"a cache budget cannot be negative: {budget_bytes}")
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[str, tuple[V, int]] = OrderedDict()

    def get(self, key: str) -> V | None:
        """The entry under `key` (now the most recently used), or None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: str, value: V, size_bytes: int) -> Stored:
        """Keep `value` under `key` if it fits the budget, evicting least recently used entries to make room."""
        if size_bytes < 0:
            raise ValueError(f"an entry's size cannot be negative: {size_bytes}")
        self._entries.pop(key, None)  # a replaced entry's old size no longer counts
        if size_bytes > self.budget_bytes:
            return Stored(kept=False)
        evicted = []
        while self._entries and self.used_bytes + size_bytes > self.budget_bytes:
            oldest, _ = self._entries.popitem(last=False)
            evicted.append(oldest)
        self._entries[key] = (value, size_bytes)
        return Stored(kept=True, evicted=evicted)

    def clear(self) -> list[str]:
        """Drop every entry; their keys, least recently used first."""
        keys = list(self._entries)
        self._entries.clear()
        return keys

    @property
    def used_bytes(self) -> int:
        """The sizes of the kept entries, summed."""
        return sum(size for _, size in self._entries.values())

    def keys(self) -> list[str]:
        """The kept keys, least recently used first."""
        return list(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
