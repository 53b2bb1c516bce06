"""The worker's entry point for one run in its own process: `python -m tunedeck.engine.child --spec FILE`.

Exit status tells the supervisor what happened without parsing output: 0 succeeded,
3 paused (a checkpoint was written), 4 cancelled, 2 refused before training (bad input:
never worth retrying), 1 failed during training (a diagnosis event says why).

On several processes (under `torchrun`, or Ray Train through `run_rank`) each process runs
this entry point as one rank. A launcher reads any non-zero exit as a crash and stops the
other ranks, so there every rank exits 0 unless it crashed, and rank 0 writes the status
into the `--outcome` file instead. A rank that ran out of memory exits with a failure after
asking for a smaller micro-batch; its launcher then restarts every rank, and they train on
with it (`tunedeck.engine.distributed.group_restart`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import TunedeckError
from tunedeck.core.events import EventType, EventWriter
from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.parent_death import die_with_parent
from tunedeck.core.rundir import RunDir
from tunedeck.engine.distributed.group_restart import restarted
from tunedeck.engine.distributed.ranks import Ranks, current_ranks, destroy_process_group
from tunedeck.engine.termination import pause_on_termination

if TYPE_CHECKING:
    from tunedeck.engine.training.run_spec import RunSpec

_EXIT_BY_STATUS = {"succeeded": ExitCode.SUCCEEDED, "paused": ExitCode.PAUSED, "cancelled": ExitCode.CANCELLED}


def main(argv: list[str] | None = None) -> int:
    """Run the spec in `--spec` and return the exit status (see the module docstring on several processes)."""
    parser = argparse.ArgumentParser(prog="python -m tunedeck.engine.child")
    parser.add_argument("--spec", required=True, type=Path, help="JSON run spec")
    parser.add_argument("--outcome", type=Path, help="file rank 0 writes the exit status into")
    args = parser.parse_args(argv)
    ranks = current_ranks()
    if not ranks.distributed:
        _pause_on_termination_of(args.spec)
        code = run_process(args.spec, ranks)
        if args.outcome is not None:
            write_json_atomic(args.outcome, {"exit": code})
        return code
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        # Under torchrun: die with the launcher, so a killed worker (and its launcher) leaves no rank behind.
        die_with_parent()
    return run_rank(args.spec, args.outcome, ranks)


def run_rank(spec_path: Path, outcome_path: Path | None, ranks: Ranks | None = None) -> int:
    """Run one rank of a multi-process run in this process; the exit code its launcher should see.

    The launcher's termination signal ends a rank at once (the default action): it is sent when
    another rank died, and a rank that tried to checkpoint then would wait on the dead one.
    A pause goes through the stop file, which every rank reads at the same step.
    """
    ranks = ranks or current_ranks()
    if restarted():
        restarted_spec = _spec_after_torchrun_restart(spec_path, outcome_path, ranks)
        if restarted_spec is None:
            return ExitCode.SUCCEEDED  # the try before ended the run; the outcome file says how
        spec_path = restarted_spec
    code = run_process(spec_path, ranks)
    if code == ExitCode.RESTART:
        return ExitCode.FAILED  # a failed rank: the launcher restarts every process
    if ranks.is_main and outcome_path is not None:
        write_json_atomic(outcome_path, {"exit": code})
    return ExitCode.FAILED if code == ExitCode.FAILED else ExitCode.SUCCEEDED


def _spec_after_torchrun_restart(spec_path: Path, outcome_path: Path | None, ranks: Ranks) -> Path | None:
    """torchrun restarted every process: the spec to train now (an out-of-memory retry), or None to stop.

    A restart that no process asked for follows a crash: on one machine it is not retried.
    """
    from tunedeck.engine.distributed.group_restart import spec_after_restart, write_rank_spec

    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    decided = spec_after_restart(spec, outcome_path, ranks, rerun_lost_group=False, device_type=_device_type())
    if decided is None:
        destroy_process_group(ranks)
        return None
    return write_rank_spec(spec_path, decided, ranks)


def run_process(spec_path: Path, ranks: Ranks) -> int:
    """Preflight (a new run, or a resume on another platform), then train the spec as process `ranks`.

    Returns the child's exit status for how it ended.
    """
    from tunedeck.engine.training.oom_retry import GroupRestartError
    from tunedeck.engine.training.run_spec import RunSpec
    from tunedeck.engine.training.training_run import RunFailedError, run_training

    run_dir: RunDir | None = None
    try:
        spec = RunSpec.read(spec_path)
        run_dir = RunDir(spec.out_dir)
        spec = dataclasses.replace(spec, processes=ranks.world_size)
        spec, preflight = _preflight(spec, ranks)
        result = run_training(spec, preflight=preflight, ranks=ranks)
    except GroupRestartError as error:  # the run directory holds the retry; every process restarts
        print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return ExitCode.RESTART
    except RunFailedError as error:  # the run directory already holds the diagnosis
        print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return ExitCode.FAILED
    except TunedeckError as error:  # refused on bad input before training
        _report(run_dir if ranks.is_main else None, "refused", error)
        return ExitCode.REFUSED
    except Exception as error:  # a crash still leaves a diagnosis for the supervisor
        _report(run_dir if ranks.is_main else None, "error", error)
        return ExitCode.FAILED
    if ranks.is_main:
        print(json.dumps(result.to_dict()), flush=True)
    return _EXIT_BY_STATUS.get(result.status, ExitCode.FAILED)


def _preflight(spec: RunSpec, ranks: Ranks) -> tuple[RunSpec, dict[str, Any] | None]:
    """The checks before training that apply to `spec`, then the process group (`checks_before_training`)."""
    from tunedeck.engine.preflight.before_training import checks_before_training

    return checks_before_training(spec, ranks)


def _device_type() -> str:
    """The device type this process trains on, for the process group's backend."""
    from tunedeck.engine.preflight.before_training import device_type_here

    return device_type_here()


def _pause_on_termination_of(spec_path: Path) -> None:
    """`pause_on_termination` for the run directory the spec names (nothing when the spec is unreadable)."""
    try:
        out = json.loads(Path(spec_path).read_text(encoding="utf-8")).get("out")
    except (OSError, json.JSONDecodeError, AttributeError):
        return  # run_process refuses the spec with the reason
    if out:
        pause_on_termination(RunDir(Path(out)))


def _report(run_dir: RunDir | None, kind: str, error: BaseException) -> None:
    message = f"{type(error).__name__}: {error}"
    print(message, file=sys.stderr, flush=True)
    if run_dir is None or not run_dir.events.is_file():
        return  # no run directory was made (a refused new run leaves nothing behind)
    with EventWriter(run_dir.events) as events:
        events.emit(EventType.DIAGNOSIS, kind=kind, message=message, advice=[])


if __name__ == "__main__":
    sys.exit(main())
