"""KeyedLocks: one holder per key at a time, other keys free, nothing kept once released."""

from __future__ import annotations

import threading
import time

import pytest

from tests.waiting import HANG_S
from tunedeck.api.keyed_locks import KeyedLocks


def test_the_same_key_waits_and_another_key_does_not() -> None:
    locks = KeyedLocks()
    entered: list[str] = []
    with locks.hold("a"):
        waiter = threading.Thread(target=lambda: _enter(locks, "a", entered))
        other = threading.Thread(target=lambda: _enter(locks, "b", entered))
        waiter.start()
        other.start()
        other.join(timeout=HANG_S)
        assert entered == ["b"]  # "b" is free while "a" is held
        time.sleep(0.2)
        assert entered == ["b"] and waiter.is_alive()  # "a" waits for its holder
        assert len(locks) == 1
    waiter.join(timeout=HANG_S)
    assert entered == ["b", "a"]
    assert len(locks) == 0


def test_a_failing_block_releases_its_key() -> None:
    locks = KeyedLocks()
    with pytest.raises(RuntimeError), locks.hold("a"):
        raise RuntimeError("export failed")
    assert len(locks) == 0
    with locks.hold("a"):  # not left locked
        assert len(locks) == 1


def _enter(locks: KeyedLocks, key: str, entered: list[str]) -> None:
    with locks.hold(key):
        entered.append(key)
