"""Tying a process's life to its parent's (Linux), so no run outlives the worker that started it."""

from __future__ import annotations

import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a no-op elsewhere).

    Without this a SIGKILLed worker would leave an orphaned training process
    writing into a run directory nobody reads, still holding the accelerator.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
