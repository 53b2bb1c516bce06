"""Waiting on a condition instead of sleeping: tests that hold however fast or slow the machine is.

A fixed sleep is a bet on the machine's speed: too short on a loaded machine, wasted
on a fast one. `wait_until` polls a condition and only gives up at a deadline that
bounds a hang, never one a working system could plausibly reach.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Long enough that only a hang reaches it, even on a heavily loaded machine.
HANG_S = 120.0


def wait_until(condition: Callable[[], T], what: str, *, timeout_s: float = HANG_S, poll_s: float = 0.02) -> T:
    """Poll `condition` until it returns something truthy, and return that; AssertionError after `timeout_s`.

    `what` names the awaited condition in the failure message.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(poll_s)
