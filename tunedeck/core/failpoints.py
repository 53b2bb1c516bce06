"""Named test points: crash the process (and its worker) at an exact spot, run it out of memory, or hold it there.

Crash-recovery guarantees ("a job killed at any point completes with the same
trace") can only be tested by crashing at those points on purpose. A failpoint
does nothing unless `TUNEDECK_FAILPOINTS` names it, and each named point fires
at most once per `TUNEDECK_FAILPOINT_STATE` folder, so the restarted process
runs past it.

A holdpoint makes "running" a state a test controls rather than a race it must
win: armed through `TUNEDECK_HOLDPOINTS`, it waits while the test's gate file
is there, so a test can act on a job that is certainly still running, however
fast or slow the machine.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from tunedeck.core.settings import process_settings, setting_variable

# The variables that arm the points (`tunedeck.core.settings.ProcessSettings` reads them): tests set them.
ENV_POINTS = setting_variable("failpoints")
ENV_HOLDS = setting_variable("holdpoints")
ENV_STATE = setting_variable("failpoint_state")
HOLD_POLL_S = 0.05


def _fire_once(name: str) -> bool:
    """True the first time `name` fires for this state folder (O_EXCL holds even if two processes race)."""
    state_dir = _state_dir()
    state_dir.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(state_dir / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _armed(kind: Literal["failpoints", "holdpoints"], name: str) -> bool:
    """Whether `name` is among the armed points of `kind` (failpoints or holdpoints)."""
    settings = process_settings()
    armed = settings.failpoints if kind == "failpoints" else settings.holdpoints
    return bool(armed) and name in {item.strip() for item in armed.split(",")}


def _state_dir() -> Path:
    return process_settings().failpoint_state


def hold_gate(state_dir: Path, name: str) -> Path:
    """The gate file of holdpoint `name`: while it exists and names a step, the point holds from that step on."""
    return state_dir / f"{name}.hold"


def hold_reached(state_dir: Path, name: str) -> Path:
    """The file in which holdpoint `name` writes the step it is holding at (for the test to wait on)."""
    return state_dir / f"{name}.reached"


def failpoint(name: str, *, kill_parent: bool = False) -> None:
    """SIGKILL this process if `name` is armed and has not fired yet; with `kill_parent`, its whole process group.

    `kill_parent` is for the engine: it takes its worker down with it. The worker may be its
    parent or its grandparent (runs forked by the fork server), but it is always in the
    engine's process group, which a crash test gives a session of its own.
    """
    if not _armed("failpoints", name) or not _fire_once(name):
        return
    if kill_parent:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def out_of_memory_point(name: str) -> None:
    """Raise MemoryError (as the allocator does when memory runs out) if `name` is armed and has not fired yet."""
    if _armed("failpoints", name) and _fire_once(name):
        raise MemoryError(f"out of memory (test point {name})")


def holdpoint(name: str, step: int, *, released: Callable[[], bool]) -> None:
    """Wait here while `name` is armed and its gate file holds `step`, until the gate goes or `released()`.

    The gate file holds a step number: the point holds at that step and every later one, so
    a test can let a run reach a known state (say, a committed checkpoint) and keep it
    running there. `released` lets the process's own stop request (a pause, a cancel) end
    the wait, since a held run must still obey the requests the test is checking.
    """
    if not _armed("holdpoints", name):
        return
    state_dir = _state_dir()
    gate, reached = hold_gate(state_dir, name), hold_reached(state_dir, name)
    announced = False
    while not released():
        try:
            from_step = int(gate.read_text(encoding="utf-8").strip() or 0)
        except (FileNotFoundError, ValueError):
            return
        if step < from_step:
            return
        if not announced:
            # Written whole, then renamed: a test that sees the file never reads it half-written.
            partial = reached.with_name(f"{reached.name}.{os.getpid()}.partial")
            partial.write_text(str(step), encoding="utf-8")
            os.replace(partial, reached)
            announced = True
        time.sleep(HOLD_POLL_S)
