"""The checks before training, wherever training starts: a job's engine child and `tunedeck train`.

A new run is checked unless its config says `preflight: false`. A resumed run passed the
checks when it started; it is checked again only when it resumes on another platform
(`platform_change`), as the method requires after a platform change. A run restarted after
running out of memory is not checked again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tunedeck.engine.distributed.ranks import Ranks, alone, broadcast_from_main, init_process_group

if TYPE_CHECKING:
    from tunedeck.engine.preflight.report import PreflightReport
    from tunedeck.engine.training.run_spec import RunSpec


def checks_before_training(spec: RunSpec, ranks: Ranks) -> tuple[RunSpec, dict[str, Any] | None]:
    """Run the checks that apply to `spec`, then join the process group; the spec to train and the report.

    A failed check raises `PreflightFailedError` (the run is refused before training); on a new
    run the memory-fit decision is applied to the spec, while a resumed run keeps its config. On
    several processes rank 0 runs the checks as a one-process program before it joins the group
    (the others wait to join), every process then measures the interconnect, and rank 0's spec
    (with its memory fit) is the one all train.
    """
    from tunedeck.engine.training.run_spec import RunSpec
    from tunedeck.engine.training.training_run import MainRankRefusedError

    checked: PreflightReport | None = None
    failure: BaseException | None = None
    checks = False
    if ranks.is_main:
        reason = _reason_to_check(spec)
        checks = reason is not False
        try:
            if checks:
                with alone():
                    spec, checked = _checked(spec, reason if isinstance(reason, str) else None)
        except BaseException as error:
            if not ranks.distributed:
                raise
            failure = error  # the others are told before it is raised
    device_type = device_type_here()
    init_process_group(ranks, device_type)
    if not ranks.distributed:
        return spec, checked.to_dict() if checked is not None else None
    shared: dict[str, Any] = broadcast_from_main(
        ranks,
        ({"failure": f"{type(failure).__name__}: {failure}"} if failure is not None
         else {"spec": spec.to_dict(), "checks": checks}) if ranks.is_main else None,
    )  # fmt: skip
    if failure is not None:
        raise failure
    if "failure" in shared:
        raise MainRankRefusedError(f"rank 0 refused the run in the checks before training: {shared['failure']}")
    spec = RunSpec.from_dict(shared["spec"])
    if not shared["checks"]:
        return spec, None
    import torch

    from tunedeck.engine.preflight.interconnect import check_interconnect

    # Every process measures together; rank 0 keeps the result in its report.
    device = torch.device("cuda", ranks.local_rank) if device_type == "cuda" else torch.device("cpu")
    interconnect = check_interconnect(ranks, device)
    if checked is None:
        return spec, None
    checked.add_check(interconnect)
    return spec, checked.to_dict()


def _reason_to_check(spec: RunSpec) -> str | bool:
    """False: no checks; True: a new run's checks; a text: why a resumed run is checked again."""
    from tunedeck.engine.preflight.platform_change import resume_platform_change

    if not spec.config.preflight or spec.oom_restart is not None:
        return False
    if spec.resume_from is None:
        return True
    changed = resume_platform_change(spec.out_dir, checkpoint=spec.resume_from)
    return changed if changed is not None else False


def _checked(spec: RunSpec, reason: str | None) -> tuple[RunSpec, PreflightReport]:
    """Preflight on `spec`; on a resume (`reason` set) the run keeps its spec and its folder records the re-check."""
    from tunedeck.core.atomic_files import write_json_atomic
    from tunedeck.core.rundir import RunDir
    from tunedeck.engine.preflight.phase import PREFLIGHT_FILE, PreflightFailedError, preflight_for_run
    from tunedeck.engine.preflight.platform_change import record_platform

    if reason is None:
        return preflight_for_run(spec)
    # A job resumed on another worker starts in a new, empty folder: the run directory made for it
    # keeps this report as preflight.json (its `reason` names the change) and records the platform
    # afresh; a resume in the run's own folder updates that folder's record here.
    same_folder = RunDir(spec.out_dir).config.is_file()
    try:
        _, report = preflight_for_run(spec, reason=reason)  # a resumed run must keep its config
    except PreflightFailedError as error:
        if same_folder:
            write_json_atomic(spec.out_dir / PREFLIGHT_FILE, error.report.to_dict())
        raise
    if same_folder:
        write_json_atomic(spec.out_dir / PREFLIGHT_FILE, report.to_dict())
        record_platform(spec.out_dir, reason)
    return spec, report


def device_type_here() -> str:
    """The device type this process trains on, for the process group's backend."""
    from tunedeck.engine.distributed.ranks import device_type_of
    from tunedeck.engine.host.hardware import detect_hardware

    return device_type_of(detect_hardware().backend)
