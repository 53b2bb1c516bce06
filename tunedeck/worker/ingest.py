"""Tailing a run's `events.jsonl` into the job's events and metric series.

Every line gets its line number in this attempt's file as `seq`, so re-reading
the file after a crash inserts nothing twice (the store skips a repeated
(job, attempt, seq) and keeps the first value of each (series, step)).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.core.events import EventTail, EventType
from tunedeck.store.records import MetricPoint, NewEvent
from tunedeck.store.telemetry import event_from_record, metric_points

EventSink = Callable[[list[NewEvent], list[MetricPoint]], None]


@dataclass
class EventIngestor:
    """Reads new lines of one attempt's events file and hands them to a sink."""

    path: Path
    sink: EventSink
    last_diagnosis: dict[str, Any] | None = None
    eval_by_step: dict[int, dict[str, Any]] = field(default_factory=dict)
    _tail: EventTail = field(init=False)
    _seq: int = 0

    def __post_init__(self) -> None:
        self._tail = EventTail(self.path)

    def poll(self) -> list[dict[str, Any]]:
        """Ingest every complete new line; returns the raw events read."""
        raw = self._tail.read_new()
        if not raw:
            return []
        events: list[NewEvent] = []
        points: list[MetricPoint] = []
        for record in raw:
            events.append(event_from_record(self._seq, record))
            self._seq += 1
            points.extend(metric_points(record))
            if record.get("type") == EventType.DIAGNOSIS:
                self.last_diagnosis = record
            elif record.get("type") == EventType.EVAL and isinstance(record.get("step"), int):
                self.eval_by_step[record["step"]] = record
        self.sink(events, points)
        return raw
