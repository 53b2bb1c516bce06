"""Preflight as the first phase of a job: refuse a run that would fail, and hand on the memory-fit decision.

A refused job keeps its preflight record: every check's figures go to `preflight.json` in
the run folder (and a `phase` event to `events.jsonl`) before the error is raised, so the
worker uploads them with the failed job's files and a person sees why it was refused.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import TunedeckError
from tunedeck.core.events import EventType, EventWriter, Phase
from tunedeck.core.rundir import RunDir
from tunedeck.engine.preflight.memory_cap import memory_cap_bytes
from tunedeck.engine.preflight.report import PreflightReport
from tunedeck.engine.training.checkpointing_choice import CheckpointingChoice
from tunedeck.engine.training.run_spec import RunSpec

PREFLIGHT_FILE = "preflight.json"


class PreflightFailedError(TunedeckError):
    """At least one preflight check failed; `report` holds every check's figures."""

    def __init__(self, report: PreflightReport) -> None:
        failed = [f"{c.number} {c.name}: {c.message}" for c in report.checks if c.status == "fail"]
        # A skipped check only repeats the failure it waited on: name it, and leave its words to the report.
        skipped = [f"{c.number} {c.name}" for c in report.checks if c.status == "skip" and c.blocks]
        if skipped:
            failed.append(f"not run because of that: {', '.join(skipped)}")
        super().__init__("preflight failed: " + "; ".join(failed))
        self.report = report


def preflight_for_run(spec: RunSpec, reason: str | None = None, **kwargs: Any) -> tuple[RunSpec, PreflightReport]:
    """Run preflight on `spec`; return the spec the run should use (memory fit applied) and the report.

    `reason` says why the checks run again on a resumed run (a platform change); the report
    keeps it. Raises PreflightFailedError when a check fails, after writing the report into the
    run folder (a new run's; a resumed run's folder is the caller's to write). Keyword arguments
    go to `run_preflight`; without `memory_cap_bytes`, the cap is the spec's `memory_cap` (the
    `TUNEDECK_MEMORY_CAP` setting the worker or `tunedeck train` wrote into it).
    """
    from tunedeck.engine.preflight.runner import run_preflight

    if "memory_cap_bytes" not in kwargs:
        kwargs["memory_cap_bytes"] = memory_cap_bytes(spec.memory_cap)
    report = run_preflight(spec, **kwargs)
    report.reason = reason
    if not report.ok:
        write_failed_preflight(spec.out_dir, report)
        raise PreflightFailedError(report)
    if report.gradient_checkpointing is not None and spec.config.gradient_checkpointing == "auto":
        # The run trains as the measured step decided; its config keeps "auto" (recorded beside it resolved).
        choice = CheckpointingChoice.from_dict(report.gradient_checkpointing)
        spec = dataclasses.replace(spec, gradient_checkpointing=choice)
    fit = report.memory_fit
    if fit is not None and fit["changed"]:
        config = spec.config.model_validate(
            {
                **spec.config.model_dump(exclude_unset=True),
                "batch_size": fit["micro_batch"],
                "gradient_accumulation_steps": fit["accumulation"],
            }
        )
        spec = dataclasses.replace(spec, config=config)
    return spec, report


def write_failed_preflight(out_dir: Path, report: PreflightReport) -> bool:
    """Write `preflight.json` and a failed `phase` event into `out_dir`; False when it holds another run.

    Only a missing or empty folder (a job attempt's fresh run folder) is written to: a folder
    with files belongs to a run this refusal must not touch.
    """
    run_dir = RunDir(Path(out_dir))
    if _holds_another_run(run_dir):
        return False
    run_dir.root.mkdir(parents=True, exist_ok=True)
    document = report.to_dict()
    write_json_atomic(run_dir.root / PREFLIGHT_FILE, document)
    failed = [check.name for check in report.checks if check.blocks]
    with EventWriter(run_dir.events) as events:
        events.emit(EventType.PHASE, name=Phase.PREFLIGHT.value, status="failed", failed=failed, report=document)
    return True


def _holds_another_run(run_dir: RunDir) -> bool:
    root = run_dir.root
    if not root.exists():
        return False
    # A stop request may arrive before the run folder holds anything else; it does not count.
    return not root.is_dir() or any(entry != run_dir.stop_request for entry in root.iterdir())
