"""Committing checkpoints to storage in the background, in step order.

Uploading a checkpoint can take longer than a training step; doing it on the
worker's side of the process boundary, in its own thread, keeps the training
child from stalling (benchmarks/checkpoint_stall.py measures it). Commits run
one at a time, oldest first, so a newer checkpoint is never committed before an
older one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PendingCheckpoint:
    """A checkpoint the engine has finished writing on disk."""

    step: int
    path: Path
    metrics: dict[str, Any]
    parts: int = 1  # processes that each wrote a part (see `tunedeck.core.checkpoint_parts`)


CommitFunction = Callable[[PendingCheckpoint], None]


class BackgroundCommitter:
    """A single thread that runs `commit` for each submitted checkpoint, in order."""

    def __init__(self, commit: CommitFunction, name: str = "checkpoint-commit") -> None:
        self._commit = commit
        self._queue: queue.Queue[PendingCheckpoint | None] = queue.Queue()
        self._errors: list[BaseException] = []
        self.committed: list[int] = []
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, checkpoint: PendingCheckpoint) -> None:
        """Queue a checkpoint for commit."""
        self._queue.put(checkpoint)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._commit(item)
                self.committed.append(item.step)
            except BaseException as error:
                self._errors.append(error)

    def close(self, timeout: float | None = None) -> list[BaseException]:
        """Wait for every queued commit to finish; returns the errors they raised."""
        self._queue.put(None)
        self._thread.join(timeout=timeout)
        return list(self._errors)
