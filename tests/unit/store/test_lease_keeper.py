"""The lease keeper beats on its own clock, survives a failing store, and stops once the lease is lost."""

from __future__ import annotations

import threading
import time

from tunedeck.store.lease_keeper import LeaseKeeper
from tunedeck.store.records import Heartbeat


class ScriptedHeartbeat:
    """Answers beats from a script (an exception instance is raised); then keeps the last answer."""

    def __init__(self, *answers: Heartbeat | Exception) -> None:
        self.answers = list(answers)
        self.calls = 0
        self.beaten = threading.Event()

    def __call__(self) -> Heartbeat:
        self.calls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if self.calls >= 4:
            self.beaten.set()
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_beats_while_the_holder_is_busy_elsewhere() -> None:
    heartbeat = ScriptedHeartbeat(Heartbeat(ok=True, requested_action=None))
    keeper = LeaseKeeper(heartbeat, interval_s=0.02).start()
    assert heartbeat.calls == 1  # the first beat is sent at start, before the attempt does anything
    try:
        assert heartbeat.beaten.wait(5), "the keeper stopped beating"
    finally:
        keeper.stop()
    assert not keeper.lost.is_set()
    calls = heartbeat.calls
    time.sleep(0.1)
    assert heartbeat.calls == calls  # nothing after stop


def test_relays_the_latest_answer_and_stops_once_the_token_is_stale() -> None:
    heartbeat = ScriptedHeartbeat(
        Heartbeat(ok=True), Heartbeat(ok=True, requested_action="pause"), Heartbeat(ok=False)
    )
    keeper = LeaseKeeper(heartbeat, interval_s=0.01).start()
    assert keeper.lost.wait(5)
    time.sleep(0.1)
    keeper.stop()
    assert heartbeat.calls == 3  # no beat after the stale answer
    assert keeper.latest is not None and keeper.latest.ok is False


def test_a_failing_store_does_not_end_the_lease() -> None:
    heartbeat = ScriptedHeartbeat(
        Heartbeat(ok=True), RuntimeError("database is locked"), RuntimeError("database is locked"),
        Heartbeat(ok=True, requested_action="cancel"),
    )
    keeper = LeaseKeeper(heartbeat, interval_s=0.01).start()
    try:
        assert heartbeat.beaten.wait(5)
    finally:
        keeper.stop()
    assert not keeper.lost.is_set()
    assert keeper.latest == Heartbeat(ok=True, requested_action="cancel")
