"""SharedBuildLocks: one builder per key across processes on one database, lapse noticed, nothing left behind.

The leases here live 0.3 s, yet no test bets on how fast the machine is: each waits on
what it can observe (a refused try, a count of renewals, an expiry in the table) and
asks the table about a lease at an explicit moment rather than at "now, after a sleep".
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from tests.waiting import HANG_S, wait_until
from tunedeck.api.build_locks import SharedBuildLocks
from tunedeck.jobs.store import JobStore
from tunedeck.jobs.types import utcnow

KEY = "users/u1/jobs/j1/exports/merged-final"
TTL_S = 0.3


@pytest.fixture
def store(sqlite_url: str) -> Iterator[JobStore]:
    with JobStore.open(sqlite_url, migrate=False) as opened:
        yield opened


def _expiry(store: JobStore) -> datetime:
    """When the lease on KEY ends, as the table says (it must be held)."""
    held = store.work_leases.holder_of(KEY)
    assert held is not None, "the lease is not held"
    return held[1]


def test_a_second_process_waits_for_the_first_to_finish(
    sqlite_url: str, store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with JobStore.open(sqlite_url, migrate=False) as other_store:
        first = SharedBuildLocks(store.work_leases, poll_s=0.02)
        second = SharedBuildLocks(other_store.work_leases, poll_s=0.02)  # its own in-process locks
        refused = threading.Event()
        try_acquire = other_store.work_leases.try_acquire

        def spied_try_acquire(name: str, holder: str, ttl_s: float, *, now: datetime | None = None) -> bool:
            taken = try_acquire(name, holder, ttl_s, now=now)
            if not taken:
                refused.set()  # the second process reached the lease and found it held
            return taken

        monkeypatch.setattr(other_store.work_leases, "try_acquire", spied_try_acquire)
        order: list[str] = []
        inside = threading.Event()

        def later() -> None:
            inside.wait()
            with second.hold(KEY):
                order.append("second")

        waiter = threading.Thread(target=later, daemon=True)  # daemon: a failed test must not hang on it
        waiter.start()
        with first.hold(KEY) as hold:
            inside.set()
            # Hold until the waiter is seen polling (refused at least once), however long that takes;
            # a broken lock would let it in instead, which ends the wait too and fails below.
            wait_until(lambda: refused.is_set() or order, "the second process to try the held lease")
            assert order == [] and refused.is_set()
            order.append("first")
            held = store.work_leases.holder_of(KEY)
            assert held is not None and held[0] == hold.holder
        waiter.join(timeout=HANG_S)
        assert not waiter.is_alive(), "the second process never got the lease"
        assert order == ["first", "second"]
        assert store.work_leases.holder_of(KEY) is None and len(first) == len(second) == 0


def test_a_lease_taken_over_is_noticed_and_the_new_holder_kept(store: JobStore) -> None:
    locks = SharedBuildLocks(store.work_leases, ttl_s=TTL_S, poll_s=0.02)
    with locks.hold(KEY) as hold:
        assert not hold.lost.is_set()
        # What another server does once our lease lapsed: the row is theirs now.
        assert store.work_leases.release(KEY, hold.holder)
        assert store.work_leases.try_acquire(KEY, "other-server", ttl_s=60)
        assert hold.lost.wait(timeout=HANG_S)  # the renewing thread found the lease gone
    held = store.work_leases.holder_of(KEY)
    assert held is not None and held[0] == "other-server"  # leaving did not release their lease


def test_the_lease_is_renewed_while_held(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    renewed: list[bool] = []
    renew = store.work_leases.renew

    def counted_renew(name: str, holder: str, ttl_s: float, *, now: datetime | None = None) -> bool:
        answer = renew(name, holder, ttl_s, now=now)
        renewed.append(answer)
        return answer

    monkeypatch.setattr(store.work_leases, "renew", counted_renew)
    locks = SharedBuildLocks(store.work_leases, ttl_s=TTL_S, poll_s=0.02)
    with locks.hold(KEY) as hold:
        first_expiry, beats = _expiry(store), len(renewed)
        lifetimes = timedelta(seconds=3 * TTL_S)
        # Three more renewals, and an expiry three lifetimes past the first: only renewal moves it.
        wait_until(
            lambda: len(renewed) >= beats + 3 and _expiry(store) >= first_expiry + lifetimes,
            "the lease to be renewed past three lifetimes",
        )
        assert all(renewed) and not hold.lost.is_set()
        held = store.work_leases.holder_of(KEY)
        assert held is not None and held[0] == hold.holder
        # Two lifetimes after it would have lapsed unrenewed, another server is still turned away.
        assert not store.work_leases.try_acquire(
            KEY, "other-server", ttl_s=60, now=first_expiry + timedelta(seconds=2 * TTL_S)
        )
    assert store.work_leases.holder_of(KEY) is None  # released on leaving


def test_a_failed_release_leaves_the_lease_to_lapse(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    locks = SharedBuildLocks(store.work_leases, ttl_s=TTL_S, poll_s=0.02)

    def unreachable(*_: object) -> bool:
        raise ConnectionError("database went away")

    with locks.hold(KEY) as hold:
        monkeypatch.setattr(store.work_leases, "release", unreachable)
    monkeypatch.undo()
    held = store.work_leases.holder_of(KEY)
    assert held is not None and held[0] == hold.holder  # still there, no longer renewed
    expires_at = held[1]
    # Still ours until its expiry: another server is turned away at any moment before it.
    assert not store.work_leases.try_acquire(KEY, "next-server", ttl_s=60, now=expires_at - timedelta(milliseconds=1))

    def lapsed_and_taken() -> bool:
        assert store.work_leases.holder_of(KEY) == held  # nobody renews it after leaving
        return store.work_leases.try_acquire(KEY, "next-server", ttl_s=60)

    wait_until(lapsed_and_taken, "the unreleased lease to lapse")
    assert utcnow() > expires_at
    taken = store.work_leases.holder_of(KEY)
    assert taken is not None and taken[0] == "next-server"
