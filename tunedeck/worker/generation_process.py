"""The worker's one long-lived generation process: started on the first generate item, asked one request at a time.

`tunedeck.engine.generation_server` keeps recently used models loaded, so a second
prompt to the same model skips fetching and loading it. The worker talks to it over
stdin and stdout, one JSON line each way; a lock makes the worker's work slots queue
behind each other. A request first names only the model's key; when the process does
not hold that model it answers `miss`, and the model is fetched (outside the lock, so
another slot's prompt to a loaded model need not wait for a download) and sent along.

A request whose spec asks to `stream` hears the answer so far (`partial` lines, relayed to
`on_partial` on the calling thread) while the process generates.

A process that dies or overruns a request fails that request (EngineProcessError: a 503
on the item) and is forgotten; the next request starts a fresh one. It ends when the
worker closes it, and dies with the worker otherwise.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tunedeck.core.errors import Issue
from tunedeck.core.parent_death import die_with_parent
from tunedeck.worker.engine_process import EngineProcessError, EngineRefusedError, lower_priority

log = logging.getLogger(__name__)
SERVER_MODULE = "tunedeck.engine.generation_server"
STOP_GRACE_S = 5.0
_TAIL_CHARS = 2000


@dataclass(frozen=True)
class GenerationLaunch:
    """How to start the process: environment over the worker's, where its log goes, its cache budget in bytes."""

    env: dict[str, str]
    log_path: Path
    cache_bytes: int


@dataclass
class _Running:
    process: subprocess.Popen[str]
    answers: queue.Queue[str | None]  # the process's stdout lines; None once it closed
    log_path: Path
    log_start: int  # where this process's lines start in the log (earlier processes wrote before)


class GenerationProcess:
    """A client for the generation process; starts it on first use and again after it died."""

    def __init__(self, command: list[str] | None = None) -> None:
        self._command = command or [sys.executable, "-m", SERVER_MODULE]
        self._lock = threading.Lock()
        self._running: _Running | None = None
        self._closed = False
        self._release_asked = False
        # The process is started from this one long-lived thread: Linux sends the parent-death
        # signal when the starting *thread* ends, and a work item's thread ends with its item.
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generation-starter")

    def generate(
        self,
        key: str,
        request: dict[str, Any],
        *,
        fetch: Callable[[], dict[str, Any]],
        launch: GenerationLaunch,
        timeout_s: float,
        on_partial: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """The result of `request` on the model `key` names; `fetch` downloads it only if it is not loaded.

        `on_partial` hears each answer-so-far the process sends while generating.

        EngineRefusedError when the engine refused the input; EngineProcessError when the
        process died or ran past `timeout_s`.
        """
        answer: dict[str, Any] | None = None
        with self._lock:
            if self.alive:
                answer = self._ask({"key": key, "spec": request}, launch, timeout_s, on_partial)
            else:
                # A new process holds nothing: no need to ask. Started now, it imports its libraries
                # while the model downloads.
                self._started(launch)
        if answer is None or answer.get("miss"):
            model = fetch()
            with self._lock:
                answer = self._ask({"key": key, "spec": {**request, **model}}, launch, timeout_s, on_partial)
        if "result" in answer and isinstance(answer["result"], dict):
            return dict(answer["result"])
        if "error" in answer:
            issues = [Issue(**issue) for issue in answer.get("issues") or []] or [Issue(str(answer["error"]))]
            raise EngineRefusedError(str(answer["error"]), issues, str(answer.get("kind") or ""))
        raise EngineProcessError(f"the generation process gave an answer that is not a result: {answer}")

    @property
    def alive(self) -> bool:
        """Whether a process is running now."""
        running = self._running
        return running is not None and running.process.poll() is None

    @property
    def pid(self) -> int | None:
        """The running process's id, or None."""
        running = self._running
        return running.process.pid if running is not None and running.process.poll() is None else None

    def release(self) -> None:
        """Drop every kept model: end the process now, or right after the request it is answering.

        Never waits (the worker's loop calls it); the next request starts a fresh process.
        """
        if self._lock.acquire(blocking=False):
            try:
                self._release_asked = False
                self._stop(graceful=True)
            finally:
                self._lock.release()
        else:
            self._release_asked = True

    def close(self) -> None:
        """End the process (stdin closed, then killed after a grace period); later requests are refused."""
        self._closed = True
        self._stop(graceful=True)
        self._starter.shutdown(wait=False)

    def _ask(
        self,
        message: dict[str, Any],
        launch: GenerationLaunch,
        timeout_s: float,
        on_partial: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Send one request and read its answer, relaying partial answers on the way (the lock is held)."""
        running = self._started(launch)
        assert running.process.stdin is not None
        try:
            running.process.stdin.write(json.dumps(message) + "\n")
            running.process.stdin.flush()
        except OSError:
            raise self._lost(running, "ended before it took the request") from None
        while True:
            try:
                line = running.answers.get(timeout=timeout_s)
            except queue.Empty:
                self._stop(graceful=False)
                raise EngineProcessError(
                    f"the generation process took longer than {timeout_s:.0f} s and was stopped"
                ) from None
            if line is None:
                raise self._lost(running, "ended before it answered")
            try:
                answer = json.loads(line)
            except json.JSONDecodeError:
                continue  # not an answer: something printed before the process took over its stdout
            if not isinstance(answer, dict):
                continue
            if "partial" in answer:
                try:
                    if on_partial is not None:
                        on_partial(str(answer["partial"]))
                except Exception:  # the answer must still be read to its end, or the next request reads its lines
                    log.exception("a partial answer could not be passed on; the rest are dropped")
                    on_partial = None
                continue
            if "crashed" in answer:
                raise self._lost(running, f"failed: {answer['crashed']}")
            if self._release_asked:  # asked while this request ran: the answer is in, the models go
                self._release_asked = False
                self._stop(graceful=True)
            return answer

    def _started(self, launch: GenerationLaunch) -> _Running:
        if self._closed:
            raise EngineProcessError("the worker is stopping; the generation process is closed")
        running = self._running
        if running is not None and running.process.poll() is None:
            return running
        if running is not None:
            self._stop(graceful=False)  # reap the dead one
        self._running = self._starter.submit(self._start, launch).result()
        return self._running

    def _start(self, launch: GenerationLaunch) -> _Running:
        launch.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(launch.log_path, "ab") as log:
            start = log.tell()
            process = subprocess.Popen(
                [*self._command, "--cache-bytes", str(launch.cache_bytes)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, **launch.env, "PYTHONUNBUFFERED": "1"},
                text=True,
                encoding="utf-8",
                bufsize=1,
                preexec_fn=die_with_parent,
            )
        lower_priority(process.pid)
        answers: queue.Queue[str | None] = queue.Queue()
        assert process.stdout is not None
        reader = threading.Thread(
            target=_copy_lines, args=(process.stdout, answers), name=f"generation-answers-{process.pid}", daemon=True
        )
        reader.start()
        return _Running(process, answers, launch.log_path, start)

    def _lost(self, running: _Running, what: str) -> EngineProcessError:
        """The error for a process that ended mid-request, with its exit status and its last log lines."""
        try:
            code: int | None = running.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            code = None
        self._stop(graceful=False)
        status = f"exit {code}" if code is not None else "still running, stopped"
        tail = _log_tail(running)
        return EngineProcessError(f"the generation process {what} ({status})" + (f": {tail}" if tail else ""))

    def _stop(self, *, graceful: bool) -> None:
        running, self._running = self._running, None
        if running is None:
            return
        process = running.process
        if graceful and process.poll() is None and process.stdin is not None:
            try:
                process.stdin.close()  # the process ends its loop when its input ends
                process.wait(timeout=STOP_GRACE_S)
            except (OSError, subprocess.TimeoutExpired):
                pass  # killed below
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdin is not None:
            with contextlib.suppress(OSError):  # a pipe the process broke: nothing left to flush
                process.stdin.close()


def _copy_lines(stream: IO[str], answers: queue.Queue[str | None]) -> None:
    # The reader alone closes the stream, once the process closed its end: no close races a read.
    with stream:
        for line in stream:
            answers.put(line)
    answers.put(None)


def _log_tail(running: _Running) -> str:
    try:
        with open(running.log_path, "rb") as log:
            log.seek(running.log_start)
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return text[-_TAIL_CHARS:].strip()
