"""Build-once locks shared by every API process on one database (exports).

Two requests for the same export may reach two server processes, or two
machines sharing PostgreSQL and S3. Each would build it and upload into the
same prefix; when the two builds differ by a byte, files of one could end up
listed in the other's manifest. So the builder takes a work lease named after
the prefix first: threads of one process queue on an in-process lock (they do
not poll the database), processes queue on the lease. The lease is renewed
from its own thread while the build runs, and lapses `ttl_s` after a process
dies, so a crashed builder never blocks the export for good.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tunedeck.api.keyed_locks import KeyedLocks
from tunedeck.core.ids import new_id
from tunedeck.jobs.lease_keeper import LeaseKeeper
from tunedeck.jobs.records import Heartbeat
from tunedeck.jobs.work_leases import WorkLeaseRepository

log = logging.getLogger(__name__)

LEASE_TTL_S = 30.0
POLL_S = 0.5


@dataclass(frozen=True)
class BuildHold:
    """What the holder of a build lock can check: `lost` is set once its lease was taken over."""

    key: str
    holder: str
    lost: threading.Event


class SharedBuildLocks:
    """One builder per key across processes: an in-process lock, then a renewed work lease."""

    def __init__(self, leases: WorkLeaseRepository, *, ttl_s: float = LEASE_TTL_S, poll_s: float = POLL_S) -> None:
        self._leases = leases
        self._local = KeyedLocks()
        self.ttl_s = ttl_s
        self.poll_s = poll_s

    @contextmanager
    def hold(self, key: str) -> Iterator[BuildHold]:
        """Hold `key` for the block; waits while another thread or process holds it."""
        with self._local.hold(key):
            holder = new_id("build-")
            while not self._leases.try_acquire(key, holder, self.ttl_s):
                time.sleep(self.poll_s)
            keeper = LeaseKeeper(
                lambda: Heartbeat(ok=self._leases.renew(key, holder, self.ttl_s)),
                self.ttl_s / 3,
                name=f"build-lease-{holder}",
            ).start()
            try:
                yield BuildHold(key, holder, keeper.lost)
            finally:
                keeper.stop()
                self._release(key, holder)

    def _release(self, key: str, holder: str) -> None:
        try:
            self._leases.release(key, holder)
        except Exception:
            # The build itself is done (or has failed on its own); a database hiccup here must not
            # turn its answer into an error: the lease is no longer renewed and lapses within ttl_s.
            log.warning("could not release the build lease of %s; it lapses on its own", key, exc_info=True)

    def __len__(self) -> int:
        """Keys held or waited for by this process now."""
        return len(self._local)
