"""Keeping a lease alive from its own thread: a claimed job's or work item's, for the whole attempt.

An attempt spends time where no supervising loop runs: fetching the dataset and
model before the engine starts, uploading the run's record, waiting for the last
checkpoint commit and the final upload after the engine exits. A heartbeat sent
only from the supervising loop lets the lease lapse during those, on a slow
machine or with a big dataset; the worker's own requeue pass then hands the job
to a new attempt while this one still runs. A dedicated thread beats every
`interval_s` from claim until the attempt ends, whatever the attempt is doing.
A work item's attempt (an export, a preflight) is kept alive the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tunedeck.store.records import Heartbeat

log = logging.getLogger(__name__)

HeartbeatFunction = Callable[[], Heartbeat]


class LeaseKeeper:
    """Beats `heartbeat` every `interval_s` until stopped or until the lease is lost.

    `latest` is the newest answer (None before the first); `lost` is set once an
    answer says the token is stale, and no beat is sent after that.
    """

    def __init__(self, heartbeat: HeartbeatFunction, interval_s: float, name: str = "lease-keeper") -> None:
        self._heartbeat = heartbeat
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self.lost = threading.Event()
        self.latest: Heartbeat | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> LeaseKeeper:
        """Send the first beat now, then keep beating in the background; returns self."""
        self._beat()
        if not self.lost.is_set():
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating and wait for the thread (a beat in flight finishes first)."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            self._beat()
            if self.lost.is_set():
                return

    def _beat(self) -> None:
        try:
            beat = self._heartbeat()
        except Exception:
            # A store hiccup (a locked database, a dropped connection) must not end the lease
            # early: the next beat retries, and the lease itself is the deadline.
            log.warning("heartbeat failed; retrying at the next beat", exc_info=True)
            return
        self.latest = beat
        if not beat.ok:
            self.lost.set()
