"""Launching the engine as a child process that dies with its worker.

The engine runs in its own process so that a crash, an out-of-memory kill or a
hung CUDA call takes down only that job; the worker supervises from outside.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from threading import Thread
from typing import Protocol

from tunedeck.core.launcher import engine_command
from tunedeck.core.parent_death import die_with_parent


def device_env(device_ids: tuple[str, ...], *, hide: bool = False) -> dict[str, str]:
    """Environment that shows a child only its own accelerators (NVIDIA and AMD alike).

    `hide` (a job that asked for the CPU only) shows it none. Otherwise, with no ids, it is
    empty: the child keeps the worker's view, so a machine whose jobs never say how many
    devices they need still trains them on its accelerator.
    """
    if hide:
        return {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    if not device_ids:
        return {}
    visible = ",".join(device_ids)
    # PCI order makes the ids mean what nvidia-smi and /dev/nvidiaN show, not CUDA's
    # fastest-first order; an order the worker was started with is kept.
    order = os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    return {"CUDA_VISIBLE_DEVICES": visible, "HIP_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": order}


class RunningEngine(Protocol):
    """A run the supervisor watches: a fresh `EngineChild` or a run forked by the fork server."""

    def poll(self) -> int | None:
        """The exit code once the run has ended, else None."""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the run to end; returns the exit code."""

    def kill(self) -> None:
        """Stop the run at once."""

    def last_lines(self, count: int = 20) -> list[str]:
        """The last lines the run printed."""

    @property
    def lost_with_server(self) -> bool:
        """Whether the run died because the process it was forked from died, through no fault of its own."""


@dataclass
class EngineChild:
    """A running `tunedeck.engine.child` process and the tail of its output."""

    process: subprocess.Popen[bytes]
    log_path: Path
    own_group: bool = False  # the launcher leads a process group holding every rank
    _tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))
    _reader: Thread | None = None

    @classmethod
    def start(
        cls,
        spec_path: Path,
        log_path: Path,
        env: dict[str, str] | None = None,
        *,
        processes: int = 1,
        outcome_path: Path | None = None,
        command: list[str] | None = None,
    ) -> EngineChild:
        """Start the engine on `spec_path` (on `processes` processes); output goes to `log_path` and a bounded tail.

        Several processes get a process group of their own, so that stopping the run stops
        every rank, not only the launcher. `command` replaces the engine's own command line
        with another launcher of it (the Ray driver, `tunedeck.worker.ray_engine`), which
        gets a process group of its own too.
        """
        child_env = {**os.environ, **(env or {})}
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        own_group = processes > 1 or command is not None
        if command is None:
            command = engine_command(spec_path, processes, outcome_path) if processes > 1 else engine_command(spec_path)
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=child_env,
            preexec_fn=die_with_parent,
            start_new_session=own_group,
        )
        child = cls(process=process, log_path=log_path, own_group=own_group)
        child._reader = Thread(target=child._copy_output, name=f"engine-log-{process.pid}", daemon=True)
        child._reader.start()
        return child

    def _copy_output(self) -> None:
        assert self.process.stdout is not None
        with open(self.log_path, "ab") as log:
            for raw in iter(self.process.stdout.readline, b""):
                log.write(raw)
                log.flush()
                self._tail.append(raw.decode("utf-8", errors="replace").rstrip())

    def poll(self) -> int | None:
        """The exit code once the child has ended, else None."""
        return self.process.poll()

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end and its output to be copied; returns the exit code."""
        code = self.process.wait(timeout=timeout)
        if self._reader is not None:
            self._reader.join(timeout=10)
        return code

    def kill(self) -> None:
        """Stop the child at once (with every rank it launched)."""
        if self.own_group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)  # the ranks too, even once the launcher has gone
            return
        if self.process.poll() is None:
            self.process.kill()

    def last_lines(self, count: int = 20) -> list[str]:
        """The last lines the child printed (for a failed job's message)."""
        return list(self._tail)[-count:]

    @property
    def lost_with_server(self) -> bool:
        """Never: a fresh child has no server to die with."""
        return False
