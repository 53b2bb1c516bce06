"""The load of the API-under-load benchmark: exports and generations queued on a server, and proof that they ran.

`submit_load` queues distinct exports (format × checkpoint, so none is deduplicated into
an earlier one) and generations (distinct prompts) through the API. `InFlightSampler`
counts, every `interval_s`, the work items queued and running (read from the server's
SQLite file, read-only) and the engine processes alive under the server process: the
items say the work was in flight, the processes say it was loading the machine.
"""

from __future__ import annotations

import sqlite3
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

# The two formats every job has; a bundle adds packing, not a different kind of load on the API.
EXPORT_FORMATS = ("adapter", "merged")
# The engine processes a worker launches per item (`python -m tunedeck.engine.<module>`). The worker's
# resident generation process (`tunedeck.engine.generation_server`) lives on between items, so it is
# not counted: the items in flight say when generations run.
ENGINE_MODULES = ("tunedeck.engine.export", "tunedeck.engine.generation.generation")
ITEM_END_WAIT_S = 120  # the API's longest `wait`
ITEMS_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Sample:
    """Work in flight at one moment."""

    at: float
    queued: int
    running: int
    engines: int

    @property
    def in_flight(self) -> int:
        """Items queued or running."""
        return self.queued + self.running


def export_bodies(steps: tuple[int, ...]) -> Iterator[dict[str, Any]]:
    """Every distinct export of a job with checkpoints at `steps`: each format of each step, then of the final model."""
    for checkpoint in (*steps, None):
        for export_format in EXPORT_FORMATS:
            body: dict[str, Any] = {"format": export_format}
            yield body if checkpoint is None else {**body, "checkpoint": checkpoint}


def submit_load(
    client: httpx.Client, job_id: str, exports: list[dict[str, Any]], generations: int, *, tag: str,
    max_new_tokens: int,
) -> list[str]:  # fmt: skip
    """Queue the exports and `generations` generations (prompts made distinct by `tag`); their item ids.

    Every item must be new (202, queued): one found already built would add no load.
    """
    answers = [client.post(f"/jobs/{job_id}/exports", json=body) for body in exports]
    for index in range(generations):
        body = {"prompt": f"What is {index} plus {tag}?", "max_new_tokens": max_new_tokens, "compare_base": True}
        answers.append(client.post(f"/jobs/{job_id}/generate", json=body))
    for answer in answers:
        if answer.status_code != 202 or answer.json()["state"] != "queued":
            raise RuntimeError(f"expected a new queued item (202), got {answer.status_code}: {answer.text}")
    ids = [str(answer.json()["id"]) for answer in answers]
    if len(set(ids)) != len(ids):
        raise RuntimeError("two requests of one load were deduplicated into one item")
    return ids


def wait_for_items(
    client: httpx.Client, ids: list[str], timeout_s: float = ITEMS_TIMEOUT_S
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Wait for every item to end; how many ended in each state, and the errors of those that failed."""
    deadline = time.monotonic() + timeout_s
    states: dict[str, int] = {}
    errors: list[dict[str, Any]] = []
    for item_id in ids:
        while True:
            item = client.get(f"/work/{item_id}", params={"wait": ITEM_END_WAIT_S}, timeout=ITEM_END_WAIT_S + 30)
            item.raise_for_status()
            state = str(item.json()["state"])
            if state in ("succeeded", "failed", "cancelled"):
                states[state] = states.get(state, 0) + 1
                if item.json().get("error"):
                    errors.append({"kind": item.json()["kind"], **item.json()["error"]})
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"work item {item_id} did not end within {timeout_s:.0f} s")
    return states, errors


class InFlightSampler:
    """A thread that samples work in flight on a server until stopped; `latest` is the newest sample."""

    def __init__(self, database: Path, server_pid: int, interval_s: float = 0.1) -> None:
        self.database = database
        self.server = psutil.Process(server_pid)
        self.interval_s = interval_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="in-flight-sampler", daemon=True)
        self.latest = Sample(time.perf_counter(), 0, 0, 0)

    def __enter__(self) -> InFlightSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        # Read-only: the sampler must never take a write lock the server could wait on.
        connection = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, timeout=5, check_same_thread=False)
        try:
            while not self._stop.is_set():
                self.latest = self._sample(connection)
                self.samples.append(self.latest)
                self._stop.wait(self.interval_s)
        finally:
            connection.close()

    def _sample(self, connection: sqlite3.Connection) -> Sample:
        at = time.perf_counter()  # before reading: the sample shows nothing committed after this moment
        counts = dict(connection.execute("SELECT state, COUNT(*) FROM work_items GROUP BY state").fetchall())
        return Sample(at, int(counts.get("queued", 0)), int(counts.get("running", 0)), self._engine_processes())

    def _engine_processes(self) -> int:
        count = 0
        for process in self.server.children(recursive=True):
            try:
                command = process.cmdline()
            except psutil.Error:
                continue  # ended between the listing and the read
            count += any(module in command for module in ENGINE_MODULES)  # whole arguments, not substrings
        return count

    def wait_idle(self, timeout_s: float = ITEMS_TIMEOUT_S) -> None:
        """Return once no item is queued or running and no engine process is alive (a fresh sample)."""
        deadline = time.monotonic() + timeout_s
        since = time.perf_counter()
        while time.monotonic() < deadline:
            latest = self.latest
            if latest.at > since and latest.in_flight == 0 and latest.engines == 0:
                return
            time.sleep(self.interval_s)
        raise TimeoutError(f"work was still in flight after {timeout_s:.0f} s")

    def wait_started(self, since: float, timeout_s: float = ITEMS_TIMEOUT_S) -> None:
        """Return once a sample taken after `since` finds an engine process running, or nothing left in flight."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            latest = self.latest
            if latest.at > since and (latest.engines > 0 or latest.in_flight == 0):
                return
            time.sleep(self.interval_s / 2)
        raise TimeoutError(f"no engine process started within {timeout_s:.0f} s")

    def window(self, start: float, end: float) -> dict[str, Any]:
        """What was in flight between two `perf_counter` times: means and maxima of the samples."""
        inside = [sample for sample in self.samples if start <= sample.at <= end]
        if not inside:
            return {"samples": 0}
        return {
            "samples": len(inside),
            "in_flight_mean": round(statistics.fmean(s.in_flight for s in inside), 2),
            "in_flight_max": max(s.in_flight for s in inside),
            "running_mean": round(statistics.fmean(s.running for s in inside), 2),
            "running_max": max(s.running for s in inside),
            "engine_processes_mean": round(statistics.fmean(s.engines for s in inside), 2),
            "engine_processes_max": max(s.engines for s in inside),
        }
