"""The `events.jsonl` contract between the engine (writer) and the worker (reader).

One JSON object a line, append-only. The engine never touches the database; the
worker tails this file. A line is only complete once its newline is written, so
the reader never consumes a partial last line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any


class EventType(StrEnum):
    """Kinds of event a run emits."""

    METRIC = "metric"  # step, loss, learning_rate, grad_norm, tokens_per_second, ...
    EVAL = "eval"  # step, eval_loss and task metrics
    CHECKPOINT = "checkpoint"  # step, path: written completely on disk
    PHASE = "phase"  # name: preflight, baseline_eval, training, final_eval, export; status
    DIAGNOSIS = "diagnosis"  # kind (nan_loss, oom, slow, loss_rising, overfitting, ...); message; advice
    LOG = "log"  # level, message
    RESULT = "result"  # the run finished; summary
    SYSTEM = "system"  # elapsed_s; host cpu_percent, memory_used_mb; device_* readings where there is a device


class Phase(StrEnum):
    """Phases of a job, in the order they run."""

    PREFLIGHT = "preflight"
    BASELINE_EVAL = "baseline_eval"
    TRAINING = "training"
    FINAL_EVAL = "final_eval"
    EXPORT = "export"


class EventWriter:
    """Appends events to a run's `events.jsonl`.

    Each line is flushed at once so a worker tailing the file sees progress live;
    checkpoint and result events are also fsynced because resume decisions rest on them.
    """

    _DURABLE = frozenset({EventType.CHECKPOINT, EventType.RESULT, EventType.PHASE, EventType.DIAGNOSIS})

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run
        # A sampling thread emits beside the training loop: one line is written whole before the next.
        self._lock = threading.Lock()

    def emit(self, event_type: EventType | str, **fields: Any) -> dict[str, Any]:
        """Write one event and return it as written (safe to call from several threads)."""
        kind = EventType(event_type)
        record = {"type": kind.value, "time": round(time.time(), 3), **fields}
        line = json.dumps(record, default=_json_default, allow_nan=True) + "\n"
        with self._lock:
            self._handle.write(line)
            self._handle.flush()
            if kind in self._DURABLE:
                os.fsync(self._handle.fileno())
        return record

    def close(self) -> None:
        """Close the file; later emits fail."""
        self._handle.close()

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullEventWriter(EventWriter):
    """A sink that drops every event, for library calls outside a run."""

    def __init__(self) -> None:
        self.path = Path(os.devnull)

    def emit(self, event_type: EventType | str, **fields: Any) -> dict[str, Any]:
        return {"type": EventType(event_type).value, **fields}

    def close(self) -> None:
        return None


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


@dataclass
class EventTail:
    """Reads complete lines appended to an events file since the last read."""

    path: Path
    offset: int = 0

    def read_new(self) -> list[dict[str, Any]]:
        """Events appended since the previous call; a partial last line waits for the next call."""
        if not self.path.exists():
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        end = chunk.rfind(b"\n")
        if end < 0:
            return []
        complete = chunk[: end + 1]
        self.offset += len(complete)
        events = []
        for raw in complete.splitlines():
            if raw.strip():
                events.append(json.loads(raw))
        return events


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every complete event in a file."""
    return EventTail(path).read_new()
