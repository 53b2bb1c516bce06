"""A use case's transaction on SQLite and PostgreSQL: repository calls inside it join it, all or nothing."""

from __future__ import annotations

import threading
import time

import pytest

from tunedeck.core.errors import NotFoundError
from tunedeck.store.errors import AlreadyExistsError
from tunedeck.store.models import User
from tunedeck.store.store import JobStore


@pytest.fixture
def alice(job_store: JobStore) -> User:
    return job_store.users.create_user("alice")


def test_writes_inside_a_transaction_commit_together_or_not_at_all(job_store: JobStore, alice: User) -> None:
    with pytest.raises(RuntimeError, match="late failure"), job_store.transaction():
        job_store.users.create_user("bob")
        job_store.work.submit(alice, "generate", {"prompt": "hi"})
        raise RuntimeError("late failure")
    with pytest.raises(NotFoundError):
        job_store.users.get_user_by_name("bob")
    assert job_store.work.list_items(alice) == []
    with job_store.transaction():
        job_store.users.create_user("bob")
        job_store.work.submit(alice, "generate", {"prompt": "hi"})
    assert job_store.users.get_user_by_name("bob").name == "bob"
    assert len(job_store.work.list_items(alice)) == 1


def test_reads_inside_a_transaction_see_its_writes(job_store: JobStore, alice: User) -> None:
    with job_store.transaction():
        item, _ = job_store.work.submit(alice, "generate", {"prompt": "hi"})
        assert job_store.work.get(alice, item.id).id == item.id
        assert job_store.work.pending_count(alice.id, ["generate"]) == 1


def test_a_failed_repository_call_undoes_only_its_own_part(job_store: JobStore, alice: User) -> None:
    with job_store.transaction():
        job_store.work.submit(alice, "generate", {"prompt": "hi"})
        with pytest.raises(AlreadyExistsError):
            job_store.users.create_user("alice")  # its savepoint is rolled back; the transaction goes on
        job_store.users.create_user("carol")
    assert job_store.users.get_user_by_name("carol").name == "carol"
    assert len(job_store.work.list_items(alice)) == 1


def test_a_users_transactions_run_one_at_a_time(job_store: JobStore, alice: User) -> None:
    """Two check-then-write use cases of one user: the second checks only after the first committed."""
    seen: list[int] = []
    first_checked = threading.Event()

    def use_case(pause_s: float) -> None:
        with job_store.transaction(for_user=alice.id):
            seen.append(job_store.work.pending_count(alice.id, ["generate"]))
            first_checked.set()
            time.sleep(pause_s)  # the other thread tries to start its own meanwhile
            job_store.work.submit(alice, "generate", {"prompt": "hi"})

    first = threading.Thread(target=use_case, args=(0.5,))
    first.start()
    assert first_checked.wait(30)
    second = threading.Thread(target=use_case, args=(0.0,))
    second.start()
    first.join(60)
    second.join(60)
    assert seen == [0, 1]
