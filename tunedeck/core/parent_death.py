"""Tying a process's life to its parent's (Linux), so no run outlives the worker that started it."""

from __future__ import annotations

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(expected_parent: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a no-op elsewhere).

    Without this a SIGKILLed worker would leave an orphaned training process
    writing into a run directory nobody reads, still holding the accelerator.
    With `expected_parent` (the pid that started this process), a parent that died
    before the request was made ends this process at once: no signal would come.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)  # orphaned already: nothing is left to report to
