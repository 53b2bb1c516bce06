"""What every tracker module implements, and what it is told about the run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tunedeck.core.tracker_destinations import TrackerDestinations


@dataclass(frozen=True)
class TrackedRun:
    """One run as the trackers see it: its name, its config as parameters, and where it lives in tunedeck."""

    name: str  # the job's name and id, e.g. "support-bot (job_01h...)"
    params: Mapping[str, Any]  # the job's config (and base model), flat
    job_id: str | None
    job_link: str | None  # the job's page at the service's public address; None without one
    destinations: TrackerDestinations

    @property
    def job_reference(self) -> str:
        """The job's page when there is a public address, else its id (the run directory's name from the CLI)."""
        return self.job_link or self.job_id or self.name


class Tracker(Protocol):
    """One experiment tracker; each call may raise: the fan-out turns failures into warning events."""

    name: str
    package: str  # the package that provides its library, named in the warning when it is missing

    def start(self, run: TrackedRun) -> None:
        """Import the library, open the tracker's run, record the parameters and the job reference."""

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Record metrics at a training step."""

    def finish(self, status: str) -> None:
        """Close the run: `status` is succeeded, paused, cancelled or failed."""
