"""A process that imports the engine once and forks one run per request: `python -m tunedeck.engine.fork_server`.

Starting `tunedeck.engine.child` from scratch imports torch, transformers and peft
first: several seconds of CPU per job before any work, paid again by every job a
worker runs. This server pays it once. It reads one JSON request per line on stdin,

    {"id": 7, "spec": "/runs/.../spec.json", "log": "/runs/.../engine.log", "env": {...}}

forks, and answers `{"id": 7, "pid": 1234}`; when a forked run ends it writes
`{"pid": 1234, "exit": 0}` (exit codes as `tunedeck.engine.child` returns them,
`-N` for a signal). The forked run is the child's `main` with its output in the
log file and `env` added to its environment.

Forking is safe here because the server stays single-threaded and never touches an
accelerator: it only imports. The worker uses it on CPU-only machines, where no
CUDA state can leak into a fork; a worker with accelerators starts each run afresh.
EOF on stdin (the worker closed it or died) ends the server; Linux kills its runs
with it (each asks for SIGKILL when its parent dies, as cold-started runs do).
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import sys
import threading
import traceback
from typing import Any

from tunedeck.core.parent_death import die_with_parent

_REAP_INTERVAL_S = 0.1


def main() -> int:
    """Serve fork requests until stdin closes; returns 0, or 1 if a thread appeared (forking is then unsafe)."""
    # Everything a run imports, once. The preflight is imported lazily by the child, so here too.
    import tunedeck.engine.child
    import tunedeck.engine.preflight
    import tunedeck.engine.training.training_run  # noqa: F401

    # What the imports made lives as long as the server: frozen, later collections skip it (in each run
    # too), and a run's collections do not touch, and so copy, the pages it shares with the server.
    gc.collect()
    gc.freeze()
    if threading.active_count() != 1:
        # A library started a thread at import: a fork could copy a lock it holds. Refuse, so the
        # worker falls back to starting each run afresh.
        _reply({"error": f"{threading.active_count()} threads after the imports; forking is unsafe"})
        return 1
    # A service manager signals the worker's whole process group; the runs pause on SIGTERM, and
    # they die with this server, so it must outlive them: it ends when the worker closes its stdin.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _reply({"ready": True})
    # os.read, not a buffered readline: a buffer could hold a second request that select never reports.
    requests = sys.stdin.fileno()
    pending = b""
    running: set[int] = set()
    while True:
        readable, _, _ = select.select([requests], [], [], _REAP_INTERVAL_S)
        if readable:
            chunk = os.read(requests, 65536)
            if not chunk:
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                _serve(json.loads(line), running)
        _reap(running)


def _serve(request: dict[str, Any], running: set[int]) -> None:
    pid = os.fork()
    if pid == 0:
        _run_forked(request)  # never returns
    running.add(pid)
    _reply({"id": request["id"], "pid": pid})


def _reap(running: set[int]) -> None:
    for pid in list(running):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            running.discard(pid)
            _reply({"pid": pid, "exit": os.waitstatus_to_exitcode(status)})


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _run_forked(request: dict[str, Any]) -> None:
    """In the forked process: become a fresh engine child for one spec, then exit with its status."""
    code = 1
    try:
        die_with_parent()
        os.environ.update(request.get("env") or {})
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # the request pipe belongs to the server
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(null)
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(number, signal.SIG_DFL)  # the run installs its own, as a fresh child would
        from tunedeck.engine.child import main as child_main

        code = child_main(["--spec", str(request["spec"])])
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # Not sys.exit: the server's exit handlers and buffers belong to the server.
        os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
