"""`ReportingEventWriter`: the run's event log, whose metric, evaluation and result events also reach the trackers.

Trackers are fed from tunedeck's own events (the Trainer's own reporting stays off), so they get what
the job page gets: training metrics (`train/...`), each evaluation (`eval/...`), the baseline evaluation
of the untrained model (`baseline/...`) and the final evaluation of the trained one (`final/...`).
"""

from __future__ import annotations

from typing import Any

from tunedeck.core.events import EventType, EventWriter, Phase
from tunedeck.engine.tracking.fanout import TrackerFanOut

# Event fields that are bookkeeping, not metrics.
_NOT_METRICS = frozenset({"type", "time", "step"})


class ReportingEventWriter(EventWriter):
    """Writes every event to `inner`, then hands metrics to the trackers; closing it closes their runs.

    The fan-out's own warnings go to `inner` only, so they are never fed back to the trackers.
    """

    def __init__(self, inner: EventWriter, trackers: TrackerFanOut) -> None:
        self.path = inner.path
        self._inner = inner
        self._trackers = trackers
        self._step = 0
        self._status: str | None = None

    def emit(self, event_type: EventType | str, **fields: Any) -> dict[str, Any]:
        """Write the event, then report what it holds for the trackers."""
        record = self._inner.emit(event_type, **fields)
        kind = record["type"]
        if isinstance(record.get("step"), int):
            self._step = record["step"]
        if kind == EventType.METRIC.value:
            self._trackers.log_metrics(numbers(record, "train/"), self._step)
        elif kind == EventType.EVAL.value:
            self._trackers.log_metrics(numbers(record, "eval/", strip="eval_"), self._step)
        elif kind == EventType.PHASE.value and record.get("status") == "completed":
            metrics = record.get("metrics") or {}
            if record.get("name") == Phase.BASELINE_EVAL.value:
                self._trackers.log_metrics(numbers(metrics, "baseline/", strip="eval_"), self._step)
            elif record.get("name") == Phase.FINAL_EVAL.value:
                self._trackers.log_metrics(numbers(metrics, "final/", strip="eval_"), self._step)
        elif kind == EventType.RESULT.value:
            self._status = str(record.get("status"))
        return record

    def close(self) -> None:
        """Close the trackers' runs (failed when no result was written), then the event log."""
        try:
            self._trackers.finish(self._status or "failed")
        finally:
            self._inner.close()


def numbers(fields: dict[str, Any], prefix: str, strip: str = "") -> dict[str, float]:
    """The numeric fields of an event (None, booleans and bookkeeping left out), named `prefix` + name."""
    return {
        prefix + key.removeprefix(strip): float(value)
        for key, value in fields.items()
        if key not in _NOT_METRICS and isinstance(value, int | float) and not isinstance(value, bool)
    }
