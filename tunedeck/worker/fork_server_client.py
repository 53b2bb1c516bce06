"""The worker's side of `tunedeck.engine.fork_server`: runs forked from an engine imported once.

A cold engine child spends seconds importing torch, transformers and peft before it
reads its spec; on a CPU-only worker every job after the first can skip that by
asking the fork server for a run. `ForkServerClient.launch` returns a `ForkedEngine`,
which the supervisor treats as it treats an `EngineChild` (poll, wait, kill, last
lines), or None when the server cannot serve, and the caller starts the run cold.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from tunedeck.core.parent_death import die_with_parent

log = logging.getLogger(__name__)

# Imports on a loaded machine can take a minute; past this a launch gives up and starts cold.
LAUNCH_TIMEOUT_S = 180.0
# A run that died with its server (SIGKILL from Linux) reports this exit code.
KILLED = -signal.SIGKILL


class ForkServerClient:
    """One fork server process and the replies it sends (run pids, then their exit codes)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._lock = threading.Condition()
        self._next_id = 0
        self._pids: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self._closed = False
        self.served = 0  # runs forked so far
        self.refused = False  # the server said it cannot fork safely: starting it again would not help
        self._reader = threading.Thread(target=self._read_replies, name="fork-server-replies", daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, env: dict[str, str], log_path: Path) -> ForkServerClient:
        """Start the server with `env` over this process's environment; its own output goes to `log_path`.

        Call it from a thread that outlives every run (the worker's loop): Linux kills the
        server, and with it the runs, when the thread that started it ends.
        """
        log_path.parent.mkdir(parents=True, exist_ok=True)
        server_env = {**os.environ, **env}
        server_env.setdefault("PYTHONUNBUFFERED", "1")
        with open(log_path, "ab") as errors:
            process = subprocess.Popen(
                [sys.executable, "-m", "tunedeck.engine.fork_server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=server_env,
                preexec_fn=die_with_parent,
            )
        return cls(process)

    @property
    def alive(self) -> bool:
        """Whether the server can still take requests."""
        with self._lock:
            return not self._closed

    def launch(self, spec_path: Path, log_path: Path, env: dict[str, str] | None = None) -> ForkedEngine | None:
        """Fork a run of `spec_path` with its output in `log_path`; None when the server cannot."""
        with self._lock:
            if self._closed:
                return None
            self._next_id += 1
            request_id = self._next_id
        request = {"id": request_id, "spec": str(spec_path), "log": str(log_path), "env": env or {}}
        try:
            stdin = self._stdin()
            stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            stdin.flush()
        except (OSError, ValueError):
            self._mark_closed()
            return None
        deadline = time.monotonic() + LAUNCH_TIMEOUT_S
        with self._lock:
            while request_id not in self._pids and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("fork server did not answer within %.0f s; starting runs afresh", LAUNCH_TIMEOUT_S)
                    break
                self._lock.wait(left)
            pid = self._pids.pop(request_id, None)
            self.served += pid is not None
        if pid is None:
            self.close()  # a late answer would fork a run nobody supervises: stop the server instead
            return None
        return ForkedEngine(self, pid, log_path)

    def close(self) -> None:
        """Close the request pipe (the server exits) and wait for it briefly; kill it if it lingers."""
        self._mark_closed()
        with contextlib.suppress(OSError, ValueError):
            self._stdin().close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    @property
    def reported(self) -> frozenset[int]:
        """Pids of the runs whose exit the server reported."""
        with self._lock:
            return frozenset(self._exits)

    def exit_code(self, pid: int) -> int | None:
        """The exit code of run `pid` once it ended (KILLED if it died with a server that is gone)."""
        with self._lock:
            if pid in self._exits:
                return self._exits[pid]
            if self._closed and not _exists(pid):
                return KILLED
            return None

    def wait_exit(self, pid: int, timeout: float | None) -> int:
        """Wait for run `pid` to end; TimeoutError after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            code = self.exit_code(pid)
            if code is not None:
                return code
            with self._lock:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"run {pid} still running after {timeout} s")
                self._lock.wait(0.5 if left is None else min(left, 0.5))

    def _stdin(self) -> IO[bytes]:
        assert self._process.stdin is not None
        return self._process.stdin

    def _read_replies(self) -> None:
        assert self._process.stdout is not None
        for raw in iter(self._process.stdout.readline, b""):
            try:
                reply: dict[str, Any] = json.loads(raw)
            except json.JSONDecodeError:
                continue
            with self._lock:
                if "error" in reply:
                    log.warning("fork server refused to serve: %s", reply["error"])
                    self._closed = True
                    self.refused = True
                elif "exit" in reply:
                    self._exits[int(reply["pid"])] = int(reply["exit"])
                elif "pid" in reply:
                    self._pids[int(reply["id"])] = int(reply["pid"])
                self._lock.notify_all()
        self._mark_closed()

    def _mark_closed(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()


class ForkedEngine:
    """A run forked by the fork server, supervised like an `EngineChild`."""

    def __init__(self, server: ForkServerClient, pid: int, log_path: Path) -> None:
        self._server = server
        self.pid = pid
        self.log_path = log_path

    def poll(self) -> int | None:
        """The exit code once the run has ended, else None."""
        return self._server.exit_code(self.pid)

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the run to end; returns the exit code."""
        return self._server.wait_exit(self.pid, timeout)

    def kill(self) -> None:
        """Stop the run at once."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    @property
    def lost_with_server(self) -> bool:
        """Whether the run was killed because its server died (the kernel kills a dead server's runs).

        A run the server saw end reported its own exit code before the server went; one killed
        on its own (out of memory) is reported by a server still alive.
        """
        return not self._server.alive and self.poll() == KILLED and self.pid not in self._server.reported

    def last_lines(self, count: int = 20) -> list[str]:
        """The last lines the run printed (for a failed job's message)."""
        try:
            with open(self.log_path, "rb") as output:
                tail = deque(output, maxlen=count)
        except OSError:
            return []
        return [line.decode("utf-8", errors="replace").rstrip() for line in tail]


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
