"""`report_run`: the run's event log, reporting to the trackers its job config names."""

from __future__ import annotations

from tunedeck.config.training import TrainingConfig
from tunedeck.core.events import EventType, EventWriter
from tunedeck.core.tracker_destinations import TrackerDestinations
from tunedeck.engine.tracking.fanout import TrackerFanOut, build_tracker
from tunedeck.engine.tracking.params import run_params
from tunedeck.engine.tracking.protocol import TrackedRun
from tunedeck.engine.tracking.reporting_events import ReportingEventWriter
from tunedeck.engine.training.run_spec import RunSpec


def report_run(events: EventWriter, spec: RunSpec, config: TrainingConfig) -> EventWriter:
    """`events` itself when the job reports to no tracker, else an event log that also feeds its trackers.

    Called on the process that writes the run's events (rank 0) once the run directory is open; the
    trackers' runs are opened here, and closed when the returned log is closed.
    """
    if not config.report_to:
        return events
    destinations = spec.tracking or TrackerDestinations.under(spec.out_dir.resolve().parent / "trackers")
    trackers = TrackerFanOut([build_tracker(name) for name in config.report_to], events)
    trackers.start(tracked_run(spec, config, destinations))
    if trackers.names:
        events.emit(EventType.LOG, level="info", message=f"reporting to {', '.join(trackers.names)}",
                    trackers=trackers.names)  # fmt: skip
    return ReportingEventWriter(events, trackers)


def tracked_run(spec: RunSpec, config: TrainingConfig, destinations: TrackerDestinations) -> TrackedRun:
    """The run as trackers name it: "job name (job id)", or the job id, or the run folder's name."""
    if spec.job_id is not None:
        name = f"{spec.job_name} ({spec.job_id})" if spec.job_name else spec.job_id
    else:
        name = spec.job_name or spec.out_dir.resolve().name
    return TrackedRun(
        name=name,
        params=run_params(config, spec.model.name),
        job_id=spec.job_id,
        job_link=destinations.job_link(spec.job_id),
        destinations=destinations,
    )
