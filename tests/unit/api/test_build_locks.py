"""SharedBuildLocks: one builder per key across processes on one database, lapse noticed, nothing left behind."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tunedeck.api.build_locks import SharedBuildLocks
from tunedeck.jobs.store import JobStore

KEY = "users/u1/jobs/j1/exports/merged-final"


@pytest.fixture
def store(sqlite_url: str) -> Iterator[JobStore]:
    with JobStore.open(sqlite_url, migrate=False) as opened:
        yield opened


def test_a_second_process_waits_for_the_first_to_finish(sqlite_url: str, store: JobStore) -> None:
    with JobStore.open(sqlite_url, migrate=False) as other_store:
        first = SharedBuildLocks(store.work_leases, poll_s=0.02)
        second = SharedBuildLocks(other_store.work_leases, poll_s=0.02)  # its own in-process locks
        order: list[str] = []
        inside = threading.Event()

        def later() -> None:
            inside.wait()
            with second.hold(KEY):
                order.append("second")

        waiter = threading.Thread(target=later)
        waiter.start()
        with first.hold(KEY) as hold:
            inside.set()
            time.sleep(0.3)  # the waiter polls the lease all this time
            order.append("first")
            held = store.work_leases.holder_of(KEY)
            assert held is not None and held[0] == hold.holder
        waiter.join(timeout=10)
        assert order == ["first", "second"]
        assert store.work_leases.holder_of(KEY) is None and len(first) == len(second) == 0


def test_a_lease_taken_over_is_noticed_and_the_new_holder_kept(store: JobStore) -> None:
    locks = SharedBuildLocks(store.work_leases, ttl_s=0.3, poll_s=0.02)
    with locks.hold(KEY) as hold:
        assert not hold.lost.is_set()
        # What another server does once our lease lapsed: the row is theirs now.
        assert store.work_leases.release(KEY, hold.holder)
        assert store.work_leases.try_acquire(KEY, "other-server", ttl_s=60)
        assert hold.lost.wait(timeout=5)  # the renewing thread found the lease gone
    held = store.work_leases.holder_of(KEY)
    assert held is not None and held[0] == "other-server"  # leaving did not release their lease


def test_the_lease_is_renewed_while_held(store: JobStore) -> None:
    locks = SharedBuildLocks(store.work_leases, ttl_s=0.3, poll_s=0.02)
    with locks.hold(KEY) as hold:
        time.sleep(0.9)  # three lifetimes: only renewal keeps it
        assert not store.work_leases.try_acquire(KEY, "other-server", ttl_s=60)
        assert not hold.lost.is_set()


def test_a_failed_release_leaves_the_lease_to_lapse(store: JobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    locks = SharedBuildLocks(store.work_leases, ttl_s=0.3, poll_s=0.02)

    def unreachable(*_: object) -> bool:
        raise ConnectionError("database went away")

    with locks.hold(KEY):
        monkeypatch.setattr(store.work_leases, "release", unreachable)
    monkeypatch.undo()
    assert store.work_leases.holder_of(KEY) is not None  # still there, no longer renewed
    time.sleep(0.35)
    assert store.work_leases.try_acquire(KEY, "next-server", ttl_s=60)
