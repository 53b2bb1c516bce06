"""Preflight: the checks before a long training, each pass, warn or fail with its figures."""

from tunedeck.engine.preflight.context import PreflightOptions
from tunedeck.engine.preflight.phase import PreflightFailedError, preflight_for_run
from tunedeck.engine.preflight.report import CheckResult, PreflightReport
from tunedeck.engine.preflight.runner import run_preflight

__all__ = [
    "CheckResult",
    "PreflightFailedError",
    "PreflightOptions",
    "PreflightReport",
    "preflight_for_run",
    "run_preflight",
]
