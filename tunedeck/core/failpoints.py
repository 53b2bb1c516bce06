"""Named crash points for testing recovery: kill the process (and its worker) at an exact spot.

Crash-recovery guarantees ("a job killed at any point completes with the same
trace") can only be tested by crashing at those points on purpose. A failpoint
does nothing unless `TUNEDECK_FAILPOINTS` names it, and each named point fires
at most once per `TUNEDECK_FAILPOINT_STATE` folder, so the restarted process
runs past it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

ENV_POINTS = "TUNEDECK_FAILPOINTS"
ENV_STATE = "TUNEDECK_FAILPOINT_STATE"


def failpoint(name: str, *, kill_parent: bool = False) -> None:
    """SIGKILL this process if `name` is armed and has not fired yet; with `kill_parent`, its whole process group.

    `kill_parent` is for the engine: it takes its worker down with it. The worker may be its
    parent or its grandparent (runs forked by the fork server), but it is always in the
    engine's process group, which a crash test gives a session of its own.
    """
    armed = os.environ.get(ENV_POINTS)
    if not armed or name not in {item.strip() for item in armed.split(",")}:
        return
    state_dir = Path(os.environ.get(ENV_STATE, ".failpoints"))
    state_dir.mkdir(parents=True, exist_ok=True)
    marker = state_dir / name
    try:
        # O_EXCL makes "fire once" hold even if two processes reach the point together.
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    if kill_parent:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
