"""The API process's sweep of abandoned uploads: at start, then periodically, in one thread stopped at shutdown.

An upload streams to `<data_dir>/uploads/incoming/` and is removed when its request
ends; a server killed meanwhile leaves the file there. Files untouched for an hour
are such leftovers (one being received is written to continually).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tunedeck.core.leftovers import SweepReport, sweep_upload_leftovers

log = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class UploadSweeper:
    """Sweeps `incoming_dir` every `interval_s` seconds from a daemon thread, starting at once."""

    def __init__(self, incoming_dir: Path, interval_s: float, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self.incoming_dir = incoming_dir
        self.interval_s = interval_s
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep_once(self) -> SweepReport:
        """One sweep now; logged (one line) when it removed something."""
        report = sweep_upload_leftovers(self.incoming_dir, now=self.clock())
        if report.removed or report.errors:
            log.info("%s", report.summary())
        return report

    def start(self) -> UploadSweeper:
        """Start the thread (its first sweep runs at once); returns self."""
        self._thread = threading.Thread(target=self._loop, name="upload-sweeper", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and wait for a sweep in progress to end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sweep_once()
            except Exception:
                log.exception("the sweep of abandoned uploads failed")  # the server goes on; retried later
            self._stop.wait(self.interval_s)
