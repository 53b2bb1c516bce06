"""MLflow, through its tracking client: one run per job in the operator's experiment."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tunedeck.engine.tracking.params import param_text
from tunedeck.engine.tracking.protocol import TrackedRun

# MLflow's status for each way a run ends.
_STATUS = {"succeeded": "FINISHED", "paused": "KILLED", "cancelled": "KILLED", "failed": "FAILED"}
# A tracking server that does not answer gives up after a few seconds instead of retrying for minutes
# (the operator may raise these); MLflow's usage telemetry stays off.
_ENVIRONMENT = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    "MLFLOW_DISABLE_TELEMETRY": "true",
}
_PARAMS_PER_BATCH = 100  # MLflow's limit of parameters in one batch


class MlflowTracker:
    """Parameters, metrics and the job reference (tags tunedeck.job_id and tunedeck.job_url) in one MLflow run."""

    name = "mlflow"
    package = "mlflow-skinny"

    def __init__(self) -> None:
        self._client: Any = None
        self._run_id: str | None = None

    def start(self, run: TrackedRun) -> None:
        """Open the run in the experiment (created when missing) and log the config as parameters."""
        for key, value in _ENVIRONMENT.items():
            os.environ.setdefault(key, value)
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = run.destinations.mlflow_tracking_uri
        if uri.startswith("sqlite:///"):
            Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name(run.destinations.mlflow_experiment)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else client.create_experiment(run.destinations.mlflow_experiment)
        )
        tags = {"tunedeck.job": run.job_reference}
        if run.job_id is not None:
            tags["tunedeck.job_id"] = run.job_id
        if run.job_link is not None:
            tags["tunedeck.job_url"] = run.job_link
        created = client.create_run(experiment_id, run_name=run.name, tags=tags)
        self._client, self._run_id = client, created.info.run_id
        params = [Param(key, param_text(value)) for key, value in run.params.items()]
        for start in range(0, len(params), _PARAMS_PER_BATCH):
            client.log_batch(self._run_id, params=params[start : start + _PARAMS_PER_BATCH])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """One batch per step."""
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        self._client.log_batch(
            self._run_id, metrics=[Metric(key, value, stamp, step) for key, value in metrics.items()]
        )

    def finish(self, status: str) -> None:
        """Mark the run finished, killed or failed."""
        if self._run_id is not None:
            self._client.set_terminated(self._run_id, status=_STATUS.get(status, "FAILED"))
