"""How a run's end is written down: the final model folder, results.json and the RESULT event, a failure's diagnosis."""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunedeck.config.training import TrainingConfig
from tunedeck.core.events import EventType, EventWriter
from tunedeck.core.rundir import CHECKPOINT_CONFIG, RunDir
from tunedeck.engine.distributed.ranks import Ranks, barrier
from tunedeck.engine.models.pinning import pin_model_folder
from tunedeck.engine.training.callbacks import PICKLED_ARGS
from tunedeck.engine.training.run_directory import write_json_atomic
from tunedeck.engine.training.run_spec import RunResult

if TYPE_CHECKING:
    from transformers import Trainer


def save_final_model(trainer: Trainer, tokenizer: Any, run_dir: RunDir, ranks: Ranks | None = None) -> Path:
    """Save the final model (or adapter) beside a staging name, then rename it to final/.

    On several processes every one calls this (under FSDP each holds a shard the save gathers);
    rank 0 alone prepares the staging folder, writes the tokenizer and config, and renames it.
    """
    ranks = ranks or Ranks()
    staging = run_dir.root / ".final.partial"
    if ranks.is_main:
        shutil.rmtree(staging, ignore_errors=True)
    barrier(ranks)
    trainer.save_model(str(staging))
    barrier(ranks)
    if not ranks.is_main:
        return run_dir.final
    (staging / PICKLED_ARGS).unlink(missing_ok=True)
    tokenizer.save_pretrained(str(staging))
    shutil.copyfile(run_dir.config, staging / CHECKPOINT_CONFIG)
    pin_model_folder(staging)  # the adapter names its exact base: tunedeck_pin.json
    if run_dir.final.exists():
        shutil.rmtree(run_dir.final)
    os.replace(staging, run_dir.final)
    return run_dir.final


def finish_run(run_dir: RunDir, events: EventWriter, result: RunResult, started: float) -> RunResult:
    """Stamp the runtime, write results.json and emit the RESULT event; returns `result`."""
    result.runtime_seconds = time.monotonic() - started
    write_json_atomic(run_dir.results, result.to_dict())
    events.emit(EventType.RESULT, **result.to_dict())
    return result


def record_failure(
    run_dir: RunDir,
    events: EventWriter,
    error: BaseException,
    trainers: Sequence[Trainer],
    config: TrainingConfig,
    precision: str,
    total_steps: int,
    started: float,
) -> int:
    """Write the diagnosis and a failed results.json; returns the step reached (0 if no trainer was built)."""
    from tunedeck.engine.training.diagnosis import diagnose_failure

    step = int(trainers[-1].state.global_step) if trainers else 0
    diagnose_failure(error, config, precision, step=step).emit(events)
    result = RunResult(status="failed", run_dir=run_dir.root, global_step=step, total_steps=total_steps)
    result.runtime_seconds = time.monotonic() - started
    write_json_atomic(run_dir.results, {**result.to_dict(), "error": f"{type(error).__name__}: {error}"})
    return step


def numeric_metrics(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The top-level numeric metrics of an evaluation (per-class tables stay in the eval files)."""
    return {
        key: finite(value)
        for key, value in metrics.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def finite(value: Any) -> float | None:
    """`value` as a float, or None when it is None, NaN or infinite (JSON has no such numbers)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None
