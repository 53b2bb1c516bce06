"""trackio: runs in its local database folder."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tunedeck.core.errors import TunedeckError
from tunedeck.engine.tracking.protocol import TrackedRun


class TrackioTracker:
    """The config (with the job reference) and metrics per step in one trackio run.

    trackio keeps its current run per thread of execution: the run's steps all happen on the thread that
    opened it.
    """

    name = "trackio"
    package = "trackio"

    def __init__(self) -> None:
        self._run: Any = None

    def start(self, run: TrackedRun) -> None:
        """Open the run in the operator's project, without a dashboard or machine sampling."""
        folder = run.destinations.trackio_dir
        use_folder(folder)
        import trackio

        with _quiet():
            self._run = trackio.init(
                project=run.destinations.trackio_project,
                name=run.name,
                config={**run.params, "tunedeck_job": run.job_reference},
                embed=False,
                auto_log_gpu=False,
                auto_log_cpu=False,
            )

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """One row per call, at the training step."""
        import trackio

        trackio.log(dict(metrics), step=step)

    def finish(self, status: str) -> None:
        """Write what is still batched and close the run."""
        if self._run is not None:
            import trackio

            with _quiet():
                trackio.finish()  # also forgets the run, so trackio's exit hook has nothing left to finish
            self._run = None


def use_folder(folder: Path) -> None:
    """Point trackio at `folder`: it reads its folder once, when first imported, so a later change is refused."""
    folder.mkdir(parents=True, exist_ok=True)
    loaded = sys.modules.get("trackio.utils")
    if loaded is None:
        os.environ["TRACKIO_DIR"] = str(folder)
        return
    current = Path(loaded.TRACKIO_DIR)
    if current.resolve() != folder.resolve():
        raise TunedeckError(f"trackio was loaded with another folder ({current}) in this process; expected {folder}")


def _quiet() -> contextlib.AbstractContextManager[object]:
    """trackio prints where its dashboard is; the engine's output is its log, so that text is dropped."""
    return contextlib.redirect_stdout(io.StringIO())
