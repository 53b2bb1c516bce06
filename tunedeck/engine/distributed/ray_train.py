"""One rank of a run on a Ray cluster: what each Ray Train worker runs (`train_loop_per_worker`).

Ray Train has made the torch process group (gloo on the CPU, NCCL on GPUs) and set `RANK`,
`LOCAL_RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE` (and `MASTER_ADDR`/`MASTER_PORT`) before the
loop starts; the engine's `run_rank` joins that group and trains one rank, as under torchrun.

When a worker or its node is lost, Ray stops the whole group and runs the loop again on a new
one (up to `FailureConfig.max_failures` times). The rerun resumes from the newest complete
checkpoint in the run directory (one whose every rank wrote its part and marker): rank 0
picks it, removes the incomplete checkpoints after it (parts of a dead try), and every rank
trains a copy of the spec with `resume_from` set. A group lost before its first complete
checkpoint has nothing to resume, and its run directory already holds a started run: the
loop then ends with EXIT_REQUEUE, which tells the worker to give the job back
to the queue, so the next attempt starts afresh in a new run directory. A try that failed in
a way a rerun would only repeat (rank 0 wrote a failed outcome after a NaN loss or an
out-of-memory) is not run again: the loop returns at once and the run ends failed, with the
engine's diagnosis.

The run directory is read and written by every rank: on several machines it must be on a
filesystem every node mounts at the same path (the worker's runs folder on shared storage).
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
from tunedeck.core.rundir import RunDir
from tunedeck.engine.distributed.ranks import Ranks, broadcast_from_main, current_ranks

# Exit status of a run the cluster could not carry (here: a group lost before any complete
# checkpoint, so nothing to resume): not the job's fault; the worker gives the job back to the queue.
EXIT_REQUEUE = 5
EXIT_FAILED = 1  # the engine child's (tunedeck.engine.child)
# Failures a rerun would only repeat: the training itself diverged or ran out of memory. Any other
# failure (a peer lost mid-collective, a crash) is what Ray's restart is for.
DECIDED_FAILURES = frozenset({"nan_loss", "oom"})
# A checkpoint the trainer finished writes this last of its own files; the rank markers come after.
_TRAINER_STATE = "trainer_state.json"
_RANK_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")


class RankFailedError(RuntimeError):
    """This rank crashed (or lost a peer): Ray Train stops the group and, with restarts left, runs it again."""


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """Ray Train's loop on each worker: train one rank of the spec in `config["spec"]`.

    `config["outcome"]` is the file rank 0 writes the run's status into (succeeded, failed,
    refused, paused, cancelled: the loop returns normally for all of them). A rank that
    crashed raises RankFailedError, as a rank under torchrun exits non-zero: the other ranks
    would otherwise wait for it in their next collective until its timeout.
    """
    from tunedeck.engine.child import run_rank

    set_rank_env_from_ray()
    ranks = current_ranks()
    spec_path, outcome_path = Path(config["spec"]), Path(config["outcome"])
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    run_dir = RunDir(Path(spec["out"]))
    decision = broadcast_from_main(ranks, resume_decision(run_dir, spec, outcome_path) if ranks.is_main else None)
    if decision.get("failed_with"):
        return  # the try before ended in a failure of the training itself; rank 0's outcome says so already
    if decision.get("lost_before_checkpoint"):
        if ranks.is_main:
            write_json_atomic(outcome_path, {"exit": EXIT_REQUEUE})
        return
    resume = decision.get("resume_from")
    if resume and resume != spec.get("resume_from"):
        spec_path = resumed_spec(spec_path, spec, Path(resume), ranks)
    code = run_rank(spec_path, outcome_path, ranks)
    if code != 0:
        raise RankFailedError(f"rank {ranks.rank} of {ranks.world_size} failed (exit {code}); see its output above")


def set_rank_env_from_ray() -> None:
    """Set any of RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE that Ray Train left unset, from its context.

    Ray Train 2.x (its v2 API) sets all four before the loop; an older or differently
    configured Ray may not, and the engine reads its place in the run from them alone.
    """
    if all(os.environ.get(name) for name in _RANK_ENV):
        return
    import ray.train

    context = ray.train.get_context()
    values = {
        "RANK": context.get_world_rank(),
        "LOCAL_RANK": context.get_local_rank(),
        "WORLD_SIZE": context.get_world_size(),
        "LOCAL_WORLD_SIZE": context.get_local_world_size(),
    }
    for name, value in values.items():
        os.environ.setdefault(name, str(value))


def is_complete_checkpoint(folder: Path) -> bool:
    """The trainer finished the checkpoint in `folder`, and every rank that wrote it left its marker."""
    return (folder / _TRAINER_STATE).is_file() and not missing_parts(folder, written_by(folder))


def newest_complete_checkpoint(run_dir: RunDir) -> Path | None:
    """The run's newest complete checkpoint folder, or None."""
    for _, folder in sorted(run_dir.list_checkpoints(), reverse=True):
        if is_complete_checkpoint(folder):
            return folder
    return None


def resume_decision(run_dir: RunDir, spec: dict[str, Any], outcome_path: Path | None = None) -> dict[str, Any]:
    """Rank 0's choice for this try of the group: where to resume from, or that there is nothing to resume.

    First try (no run directory yet): the spec as the worker wrote it. A rerun after a lost
    group: `failed_with` when the try before failed in a way a rerun would repeat (rank 0
    wrote a failed outcome, and the run's last diagnosis is one of DECIDED_FAILURES); else the
    newest complete checkpoint, once the incomplete ones after it are removed; with none, the
    spec's own `resume_from` if it had one, else `lost_before_checkpoint`.
    """
    if not run_dir.config.is_file():
        return {"resume_from": spec.get("resume_from")}
    decided = _decided_failure(run_dir, outcome_path)
    if decided is not None:
        return {"failed_with": decided}
    newest = newest_complete_checkpoint(run_dir)
    newest_step = _step_of(newest) if newest is not None else -1
    for step, folder in run_dir.list_checkpoints():
        if step > newest_step:
            # A part of a try that died: the resumed run writes this step again, whole.
            shutil.rmtree(folder, ignore_errors=True)
    if newest is not None:
        return {"resume_from": str(newest)}
    if spec.get("resume_from"):
        return {"resume_from": spec["resume_from"]}
    return {"lost_before_checkpoint": True}


def _decided_failure(run_dir: RunDir, outcome_path: Path | None) -> str | None:
    """The kind of failure the try before ended with, when a rerun would only repeat it."""
    if outcome_path is None:
        return None
    try:
        failed = json.loads(outcome_path.read_text(encoding="utf-8")).get("exit") == EXIT_FAILED
    except (OSError, json.JSONDecodeError, AttributeError):
        return None  # rank 0 wrote no outcome: it was lost with its group
    if not failed:
        return None
    kinds = [event.get("kind") for event in read_events(run_dir.events) if event.get("type") == EventType.DIAGNOSIS]
    fatal = [kind for kind in kinds if kind != "slow"]  # a warning during training, not how it ended
    return fatal[-1] if fatal and fatal[-1] in DECIDED_FAILURES else None


def resumed_spec(spec_path: Path, spec: dict[str, Any], checkpoint: Path, ranks: Ranks) -> Path:
    """A copy of the spec that resumes from `checkpoint`, beside the original; its path.

    Each rank writes its own copy: ranks on one machine never race on a file, and ranks
    on others need not wait for rank 0's.
    """
    target = spec_path.with_name(f"{spec_path.stem}.resume-{_step_of(checkpoint)}.rank-{ranks.rank}.json")
    write_json_atomic(target, {**spec, "resume_from": str(checkpoint)})
    return target


def _step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.rpartition("-")[2])
