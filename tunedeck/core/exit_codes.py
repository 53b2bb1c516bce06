"""The exit statuses of tunedeck's engine processes: one list the worker, the CLI and the engine all read.

A run's engine process (`tunedeck.engine.child`, the Ray driver `tunedeck.engine.ray_launch`)
tells its launcher how the run ended without any output to parse; the one-shot engine
processes (`tunedeck.engine.json_process`) use the first three. On several processes rank 0
writes the same status into its outcome file (`tunedeck.core.launch_outcome`).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """How an engine process ended; the numbers are part of the worker↔engine contract."""

    SUCCEEDED = 0
    # Failed during training (a diagnosis event says why), or a crash of a one-shot process.
    FAILED = 1
    # Refused on bad input before any work: never worth retrying.
    REFUSED = 2
    # Paused: a checkpoint was written and the run can resume from it.
    PAUSED = 3
    CANCELLED = 4
    # The Ray cluster could not carry the run (not the job's fault): back to the queue.
    REQUEUE = 5
    # One rank of several ran out of memory and asked every rank to restart with a smaller micro-batch.
    RESTART = 6
