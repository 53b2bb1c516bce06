"""Plain values the queue and telemetry interfaces take and return (no database session attached)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from tunedeck.core.states import JobState

T = TypeVar("T")


@dataclass(frozen=True)
class CheckpointRef:
    """A committed checkpoint a job can resume from: verify its manifest before trusting it."""

    step: int
    storage_prefix: str
    manifest_sha256: str | None


@dataclass(frozen=True)
class ClaimedJob:
    """The attempt a claim of a job's `train` item started: the job to run and the token every later call needs.

    `item_id` is the `train` item the worker holds (its heartbeats and its end name it);
    `fencing_token` is shown once; only its hash is stored. `resume_from` is
    the newest committed checkpoint (None for a first run).
    """

    job_id: str
    item_id: str
    owner_id: str
    name: str
    config: dict[str, Any]
    fencing_token: str = field(repr=False)
    attempt: int
    lease_until: datetime
    devices_needed: int
    base_model_id: str | None
    train_dataset_version_id: str | None
    validation_dataset_version_id: str | None
    resume_from: CheckpointRef | None
    # What must not degrade (compact guard strings): the engine checks the final model against them.
    guards: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Heartbeat:
    """Answer to a heartbeat: `ok` is False once the token is stale (stop at once, write nothing).

    `requested_action` is `pause` or `cancel` when a person asked for it; truthiness is `ok`.
    """

    ok: bool
    requested_action: str | None = None
    state: JobState | None = None
    lease_until: datetime | None = None

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class NewEvent:
    """One event to store: `seq` is its line number in this attempt's `events.jsonl`."""

    seq: int
    type: str
    payload: dict[str, Any]
    time: datetime | None = None


@dataclass(frozen=True)
class MetricPoint:
    """One value of a named series at a training step."""

    name: str
    step: int
    value: float


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; pass `next_cursor` back to get the next page (None at the end)."""

    items: list[T]
    next_cursor: str | None
