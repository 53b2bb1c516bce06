"""`run_training`: one training run from spec to run directory, on the transformers Trainer.

The steps live on `TrainingRun` (`tunedeck.engine.training.training_run`), which explains their order:
every check that can fail on bad input runs before the run directory exists, so a refused
run leaves nothing behind; from the first event on, failures are recorded in the run
directory because the run may be resumed.
"""

from __future__ import annotations

from typing import Any

from tunedeck.engine.distributed.ranks import Ranks, destroy_process_group
from tunedeck.engine.host.hardware import HardwareProfile
from tunedeck.engine.models.model_source import HubResolver
from tunedeck.engine.training.callbacks import ProgressSink
from tunedeck.engine.training.run_plan import check_evaluation_needs
from tunedeck.engine.training.run_spec import RunResult, RunSpec
from tunedeck.engine.training.training_run import RunFailedError, TrainingRun

__all__ = ["RunFailedError", "TrainingRun", "check_evaluation_needs", "run_training"]


def run_training(
    spec: RunSpec,
    *,
    hardware: HardwareProfile | None = None,
    hub: HubResolver | None = None,
    progress: ProgressSink | None = None,
    preflight: dict[str, Any] | None = None,
    ranks: Ranks | None = None,
) -> RunResult:
    """Train as `spec` says and return how it ended; the run directory holds everything else.

    `preflight` is the report of the checks run just before (the job's first phase): it is
    kept in the run directory with the memory-fit decision it applied. `ranks` is this
    process's place in a multi-process run (default: from the launcher's environment).
    """
    run = TrainingRun(spec, hardware=hardware, hub=hub, progress=progress, preflight=preflight, ranks=ranks)
    try:
        run.setup()
        run.evaluate_baseline()
        result = run.train()
        if result.status == "succeeded":  # a paused or cancelled run is evaluated and saved when it completes
            metrics = run.evaluate()
            if metrics is not None:
                result.eval_metrics = metrics
            result.final_path = run.save()
        result = run.finish(result)
    finally:
        run.cleanup()
    # Only a run that ended normally tears the group down: after a failure a peer may still be
    # inside a collective, and the teardown would wait for it; the launcher ends the others instead.
    destroy_process_group(run.ranks)
    return result
