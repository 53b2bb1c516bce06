"""A termination signal asks the run to pause, through its stop file, instead of killing it mid-step."""

from __future__ import annotations

import signal
from types import FrameType

from tunedeck.core.rundir import RunDir


def pause_on_termination(run_dir: RunDir) -> None:
    """SIGTERM or SIGINT: write `pause` into the run's stop file (unless a request stands already).

    A service manager (systemd, a terminal's Ctrl-C) signals the worker's whole process group;
    the worker drains by asking its runs to pause, so a run must live long enough to write that
    checkpoint. Every process of the run reads the stop file and stops at the same step. Before
    the run directory exists the file waits in the bare folder (creating the run keeps it).
    """

    def _request_pause(signum: int, frame: FrameType | None) -> None:
        if run_dir.stop_request.is_file():
            return  # a pause or cancel the supervisor asked for already stands
        run_dir.root.mkdir(parents=True, exist_ok=True)
        run_dir.stop_request.write_text("pause", encoding="utf-8")

    signal.signal(signal.SIGTERM, _request_pause)
    signal.signal(signal.SIGINT, _request_pause)
