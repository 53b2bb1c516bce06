"""Waiting on a condition instead of sleeping: tests that hold however fast or slow the machine is.

A fixed sleep is a bet on the machine's speed: too short on a loaded machine, wasted
on a fast one. `wait_until` polls a condition and only gives up at a deadline that
bounds a hang, never one a working system could plausibly reach.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
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


def wait_while_progressing(
    condition: Callable[[], T],
    progress: Callable[[], Hashable],
    what: str,
    *,
    stall_s: float = HANG_S,
    poll_s: float = 0.5,
) -> T:
    """Poll `condition` until it returns something truthy, for as long as `progress()` keeps changing.

    For long runs (many jobs) whose total time scales with the machine: it fails only when
    `progress()` has returned the same value for `stall_s` seconds, which is a hang, not slowness.
    """
    seen = progress()
    stalled_since = time.monotonic()
    while True:
        value = condition()
        if value:
            return value
        now = progress()
        if now != seen:
            seen, stalled_since = now, time.monotonic()
        elif time.monotonic() - stalled_since >= stall_s:
            raise AssertionError(f"no progress for {stall_s:.0f}s while waiting for {what} (stuck at {seen!r})")
        time.sleep(poll_s)
