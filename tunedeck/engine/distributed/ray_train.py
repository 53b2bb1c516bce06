"""One rank of a run on a Ray cluster: what each Ray Train worker runs (`train_loop_per_worker`).

Ray Train has made the torch process group (gloo on the CPU, NCCL on GPUs) and set `RANK`,
`LOCAL_RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE` (and `MASTER_ADDR`/`MASTER_PORT`) before the
loop starts; the engine's `run_rank` joins that group and trains one rank, as under torchrun.

When a worker or its node is lost, or a process ran out of memory and asked for a retry with
a smaller micro-batch, Ray stops the whole group and runs the loop again on a new one (up to
`FailureConfig.max_failures` times). Where the rerun goes on from is rank 0's decision
(`tunedeck.engine.distributed.group_restart`): the newest complete checkpoint in the run
directory (one whose every rank wrote its part and marker), with the retry's micro-batch
when there is one. A group lost before its first complete checkpoint has nothing to resume,
and its run directory already holds a started run: the loop then ends with `ExitCode.REQUEUE`,
which tells the worker to give the job back to the queue, so the next attempt starts afresh
in a new run directory. A try that failed in a way a rerun would only repeat (rank 0 wrote a
failed outcome after a NaN loss or an out-of-memory with no retry left) is not run again:
the loop returns at once and the run ends failed, with the engine's diagnosis.

The run directory is read and written by every rank: on several machines it must be on a
filesystem every node mounts at the same path (the worker's runs folder on shared storage).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.exit_codes import ExitCode
from tunedeck.engine.distributed.group_restart import spec_after_restart, write_rank_spec
from tunedeck.engine.distributed.ranks import current_ranks

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
    decided = spec_after_restart(spec, outcome_path, ranks, rerun_lost_group=True)
    if decided is None:
        return  # the try before ended in a failure of the training itself; rank 0's outcome says so already
    if decided.get("lost_before_checkpoint"):
        if ranks.is_main:
            write_json_atomic(outcome_path, {"exit": ExitCode.REQUEUE})
        return
    if decided != spec:
        spec_path = write_rank_spec(spec_path, decided, ranks)
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
