"""`TrackerFanOut`: every call to every tracker, guarded, so that a tracker never fails a job.

A tracker whose library is missing, whose server does not answer or that raises is reported once, as
a warning event in the job's events, and dropped for the rest of the run; training goes on.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterable, Mapping

from tunedeck.core.events import EventType, EventWriter
from tunedeck.engine.tracking.protocol import TrackedRun, Tracker

INSTALL_COMMAND = "make install-trackers"

# Each tracker name of `report_to`: the module and class that implement it.
TRACKER_CLASSES: dict[str, tuple[str, str]] = {
    "mlflow": ("tunedeck.engine.tracking.mlflow_tracker", "MlflowTracker"),
    "tensorboard": ("tunedeck.engine.tracking.tensorboard_tracker", "TensorBoardTracker"),
    "wandb": ("tunedeck.engine.tracking.wandb_tracker", "WandbTracker"),
    "trackio": ("tunedeck.engine.tracking.trackio_tracker", "TrackioTracker"),
}


def build_tracker(name: str) -> Tracker:
    """The tracker called `name` (its module imports no tracker library until `start`)."""
    module, cls = TRACKER_CLASSES[name]
    tracker: Tracker = getattr(importlib.import_module(module), cls)()
    return tracker


class TrackerFanOut:
    """The run's trackers; each call reaches every tracker still in the run, each failure becomes one warning."""

    def __init__(self, trackers: Iterable[Tracker], events: EventWriter) -> None:
        self._trackers = list(trackers)
        self._events = events

    @property
    def names(self) -> list[str]:
        """The trackers still in the run."""
        return [tracker.name for tracker in self._trackers]

    def start(self, run: TrackedRun) -> None:
        """Open each tracker's run; one that cannot start is dropped with a warning."""
        self._each("start", lambda tracker: tracker.start(run))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Record metrics at `step` in every tracker."""
        if metrics:
            self._each("log", lambda tracker: tracker.log_metrics(metrics, step))

    def finish(self, status: str) -> None:
        """Close every tracker's run; the fan-out is empty afterwards."""
        self._each("finish", lambda tracker: tracker.finish(status))
        self._trackers = []

    def _each(self, action: str, call: Callable[[Tracker], None]) -> None:
        for tracker in list(self._trackers):
            try:
                call(tracker)
            except Exception as error:  # a tracker never fails the job: any error drops that tracker
                self._drop(tracker, action, error)

    def _drop(self, tracker: Tracker, action: str, error: Exception) -> None:
        self._trackers.remove(tracker)
        if isinstance(error, ImportError) and action == "start":
            reason = (
                f"the {tracker.package} package is not installed on this worker, or does not load "
                f"({type(error).__name__}: {_first_line(error)}); {INSTALL_COMMAND} installs it"
            )
        else:
            reason = f"{action} failed: {type(error).__name__}: {_first_line(error)}"
        self._events.emit(
            EventType.LOG,
            level="warning",
            message=f"{tracker.name}: {reason}; the job goes on without reporting to {tracker.name}",
            tracker=tracker.name,
        )
        if action != "finish":
            # Releases what the tracker holds open (its files, its service); already reported, so best effort.
            with contextlib.suppress(Exception):
                tracker.finish("failed")


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else ""
