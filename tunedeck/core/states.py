"""The job state machine and its allowed transitions."""

from __future__ import annotations

from enum import StrEnum

from tunedeck.core.errors import StateTransitionError


class JobState(StrEnum):
    """Where a training job is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True once nothing will happen to the job without a person asking."""
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

ALLOWED_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.RUNNING: frozenset(
        {
            JobState.SUCCEEDED,
            JobState.FAILED,
            JobState.CANCELLED,
            JobState.PAUSING,
            JobState.QUEUED,  # lease expired or worker shut down: retried from the last checkpoint
        }
    ),
    JobState.PAUSING: frozenset(
        {JobState.PAUSED, JobState.FAILED, JobState.CANCELLED, JobState.SUCCEEDED, JobState.QUEUED}
    ),
    JobState.PAUSED: frozenset({JobState.QUEUED, JobState.CANCELLED}),
    JobState.FAILED: frozenset({JobState.QUEUED}),
    JobState.CANCELLED: frozenset({JobState.QUEUED}),
    JobState.SUCCEEDED: frozenset(),
}


def can_transition(current: JobState, target: JobState) -> bool:
    """Whether `current → target` is an edge of the state machine."""
    return target in ALLOWED_TRANSITIONS[current]


def check_transition(current: JobState, target: JobState) -> None:
    """Raise StateTransitionError unless `current → target` is allowed."""
    if not can_transition(current, target):
        allowed = ", ".join(sorted(s.value for s in ALLOWED_TRANSITIONS[current])) or "none"
        raise StateTransitionError(
            f"a job cannot go from {current.value} to {target.value} (allowed from {current.value}: {allowed})"
        )


class WorkState(StrEnum):
    """Where a work item (an export, a preflight, an inspection, a generation) is in its life."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """True once the item has its result or its error."""
        return self in (WorkState.SUCCEEDED, WorkState.FAILED, WorkState.CANCELLED)


class WorkKind(StrEnum):
    """What a work item asks a worker to do."""

    TRAIN = "train"  # a job's place in the queue: its attempts run as this item
    EXPORT = "export"
    PREFLIGHT = "preflight"
    INSPECT = "inspect"
    GENERATE = "generate"
    INGEST = "ingest"
    DELETE = "delete"  # removing what a deleted object left in storage, on workers and in caches
