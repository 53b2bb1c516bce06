"""Work leases on SQLite and PostgreSQL: one holder at a time, lapse and takeover, renew and release."""

from __future__ import annotations

import threading
from datetime import timedelta

from tunedeck.jobs.store import JobStore
from tunedeck.jobs.types import utcnow

NAME = "users/u1/jobs/j1/exports/merged-final"


def test_a_live_lease_refuses_other_holders_until_released(job_store: JobStore) -> None:
    leases = job_store.work_leases
    assert leases.try_acquire(NAME, "a", ttl_s=60)
    assert not leases.try_acquire(NAME, "b", ttl_s=60)
    assert leases.try_acquire(NAME, "a", ttl_s=60)  # its own holder may take it again
    assert leases.try_acquire("users/u1/jobs/j1/exports/adapter-final", "b", ttl_s=60)  # other names are free
    assert not leases.release(NAME, "b")  # not b's to release
    held = leases.holder_of(NAME)
    assert held is not None and held[0] == "a"
    assert leases.release(NAME, "a")
    assert leases.holder_of(NAME) is None
    assert leases.try_acquire(NAME, "b", ttl_s=60)


def test_a_lapsed_lease_is_taken_over_and_its_old_holder_changes_nothing(job_store: JobStore) -> None:
    leases = job_store.work_leases
    start = utcnow()
    assert leases.try_acquire(NAME, "crashed", ttl_s=30, now=start)
    assert not leases.try_acquire(NAME, "next", ttl_s=30, now=start + timedelta(seconds=29))
    assert leases.try_acquire(NAME, "next", ttl_s=30, now=start + timedelta(seconds=31))
    assert not leases.renew(NAME, "crashed", ttl_s=30)
    assert not leases.release(NAME, "crashed")
    held = leases.holder_of(NAME)
    assert held is not None and held == ("next", start + timedelta(seconds=61))


def test_renewing_keeps_a_lease_past_its_first_lifetime(job_store: JobStore) -> None:
    leases = job_store.work_leases
    start = utcnow()
    assert leases.try_acquire(NAME, "a", ttl_s=30, now=start)
    assert leases.renew(NAME, "a", ttl_s=30, now=start + timedelta(seconds=20))
    assert not leases.try_acquire(NAME, "b", ttl_s=30, now=start + timedelta(seconds=40))
    assert leases.try_acquire(NAME, "b", ttl_s=30, now=start + timedelta(seconds=51))


def test_racing_holders_get_one_lease(job_store: JobStore) -> None:
    racers = 8
    start = threading.Barrier(racers)
    won: list[str] = []

    def race(holder: str) -> None:
        start.wait()
        if job_store.work_leases.try_acquire(NAME, holder, ttl_s=60):
            won.append(holder)

    threads = [threading.Thread(target=race, args=(f"holder-{i}",)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    held = job_store.work_leases.holder_of(NAME)
    assert held is not None and held[0] == won[0]
