"""`run_preflight`: the checks before training, run in dependency order, reported in their own order.

Tokenization (3) runs before the disk check (2) so the disk estimate counts the real
dataset; the checkpoint cycle (6) runs after throughput (7) because it releases the model
to reload the checkpoint. A check that cannot run because an earlier one failed is
reported as `skip` with the reason; an unexpected error inside a check fails that check
and the others still run. The two numerics checks (10 accumulation, 11 activation
checkpointing) run right after the full step, on the model it loaded.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunedeck.config.packed_batches import describe_packed_steps
from tunedeck.engine.host.hardware import HardwareProfile, detect_hardware
from tunedeck.engine.models.model_source import HubResolver
from tunedeck.engine.preflight.accumulation import check_accumulation
from tunedeck.engine.preflight.activation_checkpointing import check_activation_checkpointing
from tunedeck.engine.preflight.checkpoint_cycle import check_checkpoint_cycle
from tunedeck.engine.preflight.context import EARLIER_FAILURE, PreflightContext, PreflightOptions, SkipCheck
from tunedeck.engine.preflight.disk import check_checkpoint_and_disk
from tunedeck.engine.preflight.full_step import check_full_step
from tunedeck.engine.preflight.margins import check_margins
from tunedeck.engine.preflight.measure import MemoryProbe, free_accelerator_memory
from tunedeck.engine.preflight.overfit import check_overfit
from tunedeck.engine.preflight.report import CHECK_TITLES, CheckResult, PreflightReport
from tunedeck.engine.preflight.stack import check_stack
from tunedeck.engine.preflight.throughput import check_throughput
from tunedeck.engine.preflight.tokenization import check_tokenization
from tunedeck.engine.training.diagnosis import is_out_of_memory, oom_diagnosis
from tunedeck.engine.training.run_spec import RunSpec

Check = Callable[[PreflightContext], CheckResult]

EXECUTION_ORDER: tuple[tuple[int, Check], ...] = (
    (1, check_stack),
    (3, check_tokenization),
    (2, check_checkpoint_and_disk),
    (4, check_full_step),
    (10, check_accumulation),
    (11, check_activation_checkpointing),
    (5, check_overfit),
    (7, check_throughput),
    (6, check_checkpoint_cycle),
    (8, check_margins),
)
_NEEDS_A_SOUND_STACK = frozenset({4, 5, 6, 7, 10, 11})


def run_preflight(
    spec: RunSpec,
    *,
    hardware: HardwareProfile | None = None,
    memory_cap_bytes: int | None = None,
    options: PreflightOptions | None = None,
    hub: HubResolver | None = None,
    work_dir: Path | None = None,
    memory_probe: MemoryProbe | None = None,
    telemetry: Any = None,
    only: set[int] | None = None,
    on_check: Callable[[int, int, int | None], None] | None = None,
) -> PreflightReport:
    """Run the checks on `spec` (all of them, or those in `only`) and return the report.

    `hardware` replaces detection (tests describe machines they are not running on);
    `memory_cap_bytes` simulates a smaller accelerator (or host) for the memory fit.
    Scratch files (trial checkpoints) go to `work_dir`, by default a hidden folder beside
    the run's output folder that is removed afterwards. `on_check(done, total, number)` hears
    each check's start, then `(total, total, None)` at the end.
    """
    started = time.monotonic()
    hardware = hardware or detect_hardware()
    scratch = work_dir or Path(tempfile.mkdtemp(prefix=".preflight-", dir=_existing_parent(spec.out_dir)))
    ctx = PreflightContext(
        spec=spec,
        hardware=hardware,
        options=options or PreflightOptions(),
        work_dir=scratch,
        memory_cap_bytes=memory_cap_bytes,
        hub=hub,
        memory_probe=memory_probe,
        telemetry=telemetry,
    )
    results: list[CheckResult] = []
    chosen = [(number, check) for number, check in EXECUTION_ORDER if only is None or number in only]
    try:
        for number, check in chosen:
            if on_check is not None:
                on_check(len(results), len(chosen), number)
            results.append(_run_one(ctx, number, check))
        if on_check is not None:
            on_check(len(results), len(chosen), None)
    finally:
        ctx.loaded = ctx.reference = None
        free_accelerator_memory()
        if work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return PreflightReport(
        checks=sorted(results, key=lambda result: result.number),
        hardware=hardware.to_dict(),
        model=ctx.resolved.to_dict() if ctx.resolved is not None else {"name": spec.model.name},
        memory_fit=_memory_fit(ctx),
        gradient_checkpointing=ctx.checkpointing.to_dict() if ctx.checkpointing is not None else None,
        seconds=time.monotonic() - started,
    )


def _run_one(ctx: PreflightContext, number: int, check: Check) -> CheckResult:
    began = time.monotonic()
    try:
        if number in _NEEDS_A_SOUND_STACK and "stack" in ctx.problems:
            # The failure is told once, on check 1's own row; this row says why it did not run.
            raise SkipCheck(f"{EARLIER_FAILURE} (check 1 {CHECK_TITLES[1][0]})")
        result = check(ctx)
    except SkipCheck as skipped:
        result = CheckResult(number, "skip", str(skipped))
    except Exception as error:  # a crash inside one check is that check's failure, not the preflight's
        if is_out_of_memory(error):
            free_accelerator_memory()
            diagnosis = oom_diagnosis(ctx.config, str(ctx.precision or "fp32"), error, micro_batch=ctx.micro_batch)
            result = CheckResult(number, "fail", diagnosis.message, diagnosis.figures, diagnosis.advice)
        else:
            result = CheckResult(number, "fail", f"{type(error).__name__}: {error}")
    if number == 1 and result.status == "fail":
        ctx.problems["stack"] = result.message
    result.seconds = time.monotonic() - began
    return result


def _existing_parent(path: Path) -> Path:
    folder = Path(path).resolve().parent
    while not folder.exists():
        folder = folder.parent
    return folder


def _memory_fit(ctx: PreflightContext) -> dict[str, Any] | None:
    """Check 4's memory-fit decision, saying how whole-dataset packing splits the job's batch when it does."""
    if ctx.memory_fit is None:
        return None
    fit = ctx.memory_fit.to_dict()
    packed_rows = describe_packed_steps(ctx.spec.config, ctx.config)
    return {**fit, "packed_rows": packed_rows} if packed_rows else fit
