"""Restarting every process of a run together, and where the restarted group goes on from.

Two things restart a whole group of processes:

- An out-of-memory on several processes. One process cannot retry alone: the others wait for
  it in their next collective. So the process that ran out of memory writes the retry into
  the run directory (`RunDir.oom_restart`: the halved micro-batch, the multiplied
  accumulation, the attempts so far) and exits with a failure, and its launcher restarts
  every process: torchrun (`tunedeck.core.launcher`) or Ray Train (its
  `FailureConfig`). The restarted group trains with that micro-batch, from the newest
  complete checkpoint, or from the start in the same run directory when there is none yet
  (every process loads the weights afresh, so nothing half-trained carries over).
- On a Ray cluster, a lost node or worker: the group resumes from the newest complete
  checkpoint (`rerun_lost_group`). Under torchrun, on one machine, a crash is not retried:
  the restarted group ends at once with the failure, and the worker decides about the job.

Rank 0 makes the decision (`resume_decision`) and every rank follows it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.checkpoint_parts import missing_parts, written_by
from tunedeck.core.events import EventType, read_events
from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.rundir import RunDir
from tunedeck.engine.distributed.ranks import Ranks, broadcast_from_main, init_process_group

# Failures a rerun would only repeat: the training itself diverged or ran out of memory (with no
# retry left). Any other failure (a peer lost mid-collective, a crash) is what Ray's restart is for.
DECIDED_FAILURES = frozenset({"nan_loss", "oom"})
# A checkpoint the trainer finished writes this last of its own files; the rank markers come after.
_TRAINER_STATE = "trainer_state.json"


def record_oom_restart(run_dir: RunDir, micro_batch: int, accumulation: int, attempts: list[dict[str, Any]]) -> None:
    """Ask the restarted group to train with `micro_batch` × `accumulation` (written by a process that ran out)."""
    # Several processes may run out at the same step: each writes the same retry, whole.
    write_json_atomic(
        run_dir.oom_restart, {"micro_batch": micro_batch, "accumulation": accumulation, "attempts": attempts}
    )


def take_oom_restart(run_dir: RunDir) -> dict[str, Any] | None:
    """The out-of-memory retry the group before asked for, removed so that it is applied once; or None."""
    try:
        retry = json.loads(run_dir.oom_restart.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    run_dir.oom_restart.unlink(missing_ok=True)
    return retry if isinstance(retry, dict) else None


def restarted() -> bool:
    """This process is a restart of its group by torchrun (not its first start)."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT") or 0) > 0


def is_complete_checkpoint(folder: Path) -> bool:
    """The trainer finished the checkpoint in `folder`, and every rank that wrote it left its marker."""
    return (folder / _TRAINER_STATE).is_file() and not missing_parts(folder, written_by(folder))


def newest_complete_checkpoint(run_dir: RunDir) -> Path | None:
    """The run's newest complete checkpoint folder, or None."""
    for _, folder in sorted(run_dir.list_checkpoints(), reverse=True):
        if is_complete_checkpoint(folder):
            return folder
    return None


def resume_decision(
    run_dir: RunDir, spec: dict[str, Any], outcome_path: Path | None = None, *, rerun_lost_group: bool = True
) -> dict[str, Any]:
    """Rank 0's choice for this try of the group; the spec keys to change, or why it does not train.

    First try (no run directory yet): the spec as written. A restart after an out-of-memory
    retry was asked for: `oom_restart` with `resume_from` the newest complete checkpoint (the
    incomplete ones after it removed), else the spec's own `resume_from` (None: from the start,
    in this run directory). Any other restart: with `rerun_lost_group` (a Ray cluster's), as
    above without `oom_restart`, but `failed_with` when the try before failed in a way a rerun
    would repeat, and `lost_before_checkpoint` when there is nothing to resume; without it (one
    machine), `failed_with`.
    """
    if not run_dir.config.is_file():
        return {"resume_from": spec.get("resume_from")}
    retry = take_oom_restart(run_dir)
    if retry is None:
        decided = _decided_failure(run_dir, outcome_path)
        if not rerun_lost_group or decided is not None:
            return {"failed_with": decided or "crash"}
    newest = _newest_dropping_later_parts(run_dir)
    resume = str(newest) if newest is not None else spec.get("resume_from")
    if retry is not None:
        return {"resume_from": resume, "oom_restart": retry}
    return {"resume_from": resume} if resume else {"lost_before_checkpoint": True}


def spec_after_restart(
    spec: dict[str, Any],
    outcome_path: Path | None,
    ranks: Ranks,
    *,
    rerun_lost_group: bool,
    device_type: str | None = None,
) -> dict[str, Any] | None:
    """The spec this try of the group trains (every rank gets rank 0's decision), or None when it does not.

    None means the try before ended the run: rank 0 has made sure the outcome file says it
    failed (a rank that crashed wrote no outcome), and every rank should exit without a failure.
    A lost group with nothing to resume is `{"lost_before_checkpoint": True}` in the result,
    for the Ray driver to hand the job back. With `device_type` this process joins the group
    first (under torchrun; Ray Train has made it already).
    """
    if device_type is not None:
        init_process_group(ranks, device_type)
    decision: dict[str, Any] = broadcast_from_main(
        ranks, resume_decision(RunDir(Path(spec["out"])), spec, outcome_path, rerun_lost_group=rerun_lost_group)
        if ranks.is_main else None,
    )
    if "failed_with" in decision:
        if ranks.is_main and outcome_path is not None and not outcome_path.is_file():
            write_json_atomic(outcome_path, {"exit": ExitCode.FAILED})
        return None
    if decision.get("lost_before_checkpoint"):
        return decision
    return {**spec, **decision}


def write_rank_spec(spec_path: Path, spec: dict[str, Any], ranks: Ranks) -> Path:
    """`spec` in a file beside `spec_path`, one per rank and restart point; its path.

    Each rank writes its own copy: ranks on one machine never race on a file, and ranks
    on others need not wait for rank 0's.
    """
    resume = spec.get("resume_from")
    point = _step_of(Path(resume)) if resume else 0
    retry = spec.get("oom_restart") or {}
    micro = f".micro-{retry['micro_batch']}" if retry.get("micro_batch") else ""
    target = spec_path.with_name(f"{spec_path.stem}.resume-{point}{micro}.rank-{ranks.rank}.json")
    write_json_atomic(target, spec)
    return target


def _newest_dropping_later_parts(run_dir: RunDir) -> Path | None:
    """The newest complete checkpoint, once the checkpoints after it (parts of a dead try) are removed."""
    newest = newest_complete_checkpoint(run_dir)
    newest_step = _step_of(newest) if newest is not None else -1
    for step, folder in run_dir.list_checkpoints():
        if step > newest_step:
            # A part of a try that died: the restarted run writes this step again, whole.
            shutil.rmtree(folder, ignore_errors=True)
    return newest


def _decided_failure(run_dir: RunDir, outcome_path: Path | None) -> str | None:
    """The kind of failure the try before ended with, when a rerun would only repeat it."""
    if outcome_path is None:
        return None
    try:
        failed = json.loads(outcome_path.read_text(encoding="utf-8")).get("exit") == ExitCode.FAILED
    except (OSError, json.JSONDecodeError, AttributeError):
        return None  # rank 0 wrote no outcome: it was lost with its group
    if not failed:
        return None
    kinds = [event.get("kind") for event in read_events(run_dir.events) if event.get("type") == EventType.DIAGNOSIS]
    fatal = [kind for kind in kinds if kind != "slow"]  # a warning during training, not how it ended
    return fatal[-1] if fatal and fatal[-1] in DECIDED_FAILURES else None


def _step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.rpartition("-")[2])
