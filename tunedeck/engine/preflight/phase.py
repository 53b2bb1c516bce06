"""Preflight as the first phase of a job: refuse a run that would fail, and hand on the memory-fit decision."""

from __future__ import annotations

import dataclasses
from typing import Any

from tunedeck.core.errors import TunedeckError
from tunedeck.engine.preflight.report import PreflightReport
from tunedeck.engine.run_spec import RunSpec


class PreflightFailedError(TunedeckError):
    """At least one preflight check failed; `report` holds every check's figures."""

    def __init__(self, report: PreflightReport) -> None:
        failed = [f"{c.number} {c.name}: {c.message}" for c in report.checks if c.status in ("fail", "skip")]
        super().__init__("preflight failed: " + "; ".join(failed))
        self.report = report


def preflight_for_run(spec: RunSpec, **kwargs: Any) -> tuple[RunSpec, PreflightReport]:
    """Run preflight on `spec`; return the spec the run should use (memory fit applied) and the report.

    Raises PreflightFailedError when a check fails. Keyword arguments go to `run_preflight`.
    """
    from tunedeck.engine.preflight.runner import run_preflight

    report = run_preflight(spec, **kwargs)
    if not report.ok:
        raise PreflightFailedError(report)
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
