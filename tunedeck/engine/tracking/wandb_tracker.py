"""Weights & Biases: offline run files by default, or a W&B server when the operator says online."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tunedeck.engine.tracking.protocol import TrackedRun


class WandbTracker:
    """The config, metrics per step and the job reference (in the run's config and notes) in one W&B run.

    The API key, for online mode, comes from the training process's environment (WANDB_API_KEY, set by
    the worker from its settings), never from the job.
    """

    name = "wandb"
    package = "wandb"

    def __init__(self) -> None:
        self._run: Any = None

    def start(self, run: TrackedRun) -> None:
        """Open the run; W&B neither captures the process's output nor samples the machine."""
        places = run.destinations
        # The process-wide mode too, not only the run's: W&B's own usage analytics follow it, and offline
        # nothing leaves the machine. Its crash reports stay off.
        os.environ["WANDB_MODE"] = places.wandb_mode
        os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        places.wandb_dir.mkdir(parents=True, exist_ok=True)
        extra = {"base_url": places.wandb_base_url} if places.wandb_base_url else {}
        settings = wandb.Settings(
            mode=places.wandb_mode, silent=True, console="off", save_code=False, disable_git=True,
            x_disable_stats=True, x_disable_machine_info=True, **extra,
        )  # fmt: skip
        self._run = wandb.init(
            project=places.wandb_project,
            entity=places.wandb_entity,
            name=run.name,
            dir=str(places.wandb_dir),
            config={**run.params, "tunedeck_job": run.job_reference},
            notes=run.job_reference,
            settings=settings,
            reinit="create_new",
        )

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """One row per call, at the training step."""
        self._run.log(dict(metrics), step=step)

    def finish(self, status: str) -> None:
        """Close the run (exit code 0 unless it failed)."""
        if self._run is not None:
            self._run.finish(exit_code=0 if status != "failed" else 1)
