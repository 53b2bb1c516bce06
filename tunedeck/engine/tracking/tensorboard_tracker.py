"""TensorBoard: one event-file folder per job, written with torch's SummaryWriter."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tunedeck.engine.tracking.protocol import TrackedRun


class TensorBoardTracker:
    """Scalars per step; the config and the job reference as text summaries."""

    name = "tensorboard"
    package = "tensorboard"

    def __init__(self) -> None:
        self._writer: Any = None

    def start(self, run: TrackedRun) -> None:
        """Open the run's folder under the operator's TensorBoard folder."""
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=str(run.destinations.tensorboard_dir / run_folder_name(run.name)))
        self._writer = writer
        table = "\n".join(f"| {key} | `{json.dumps(value)}` |" for key, value in run.params.items())
        writer.add_text("config", "| key | value |\n|---|---|\n" + table, 0)
        writer.add_text("job", run.job_reference, 0)
        writer.flush()

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """One scalar per metric."""
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, step)
        self._writer.flush()

    def finish(self, status: str) -> None:
        """Record how the run ended and close the event file."""
        if self._writer is not None:
            self._writer.add_text("status", status, 0)
            self._writer.close()


def run_folder_name(name: str) -> str:
    """A folder name for the run: its name with anything but letters, digits, '.', '-' and '_' replaced."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "run"
