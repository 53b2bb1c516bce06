"""The one way a run's processes are launched, by the worker and by `tunedeck train` alike.

One process runs the module itself; several processes on one machine run it under torchrun;
several machines run the Ray driver (`tunedeck.engine.ray_launch`) on a Ray cluster. torchrun
stops every rank when one dies and starts them all again, up to GROUP_RESTARTS times: a rank
that ran out of memory asks for such a restart with a smaller micro-batch, and a restart nobody
asked for ends at once (`tunedeck.engine.distributed.group_restart`).

On several processes every rank exits 0 unless it crashed (a launcher reads any other status as
a crash), so rank 0 writes the run's status (`tunedeck.core.exit_codes`) into an outcome file;
`launched_exit_code` reads it back.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Enough restarts to halve a micro-batch of 64 down to 1; an unused allowance costs nothing.
GROUP_RESTARTS = 6
ENGINE_CHILD = ("-m", "tunedeck.engine.child")


def torchrun_launcher(processes: int) -> list[str]:
    """torchrun for `processes` ranks on this machine; append the module to run and its options."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
            f"--max-restarts={GROUP_RESTARTS}"]  # fmt: skip


def launch_command(module_args: list[str], processes: int = 1) -> list[str]:
    """The command line that runs `-m module ...` (`module_args`) on `processes` processes of this machine."""
    if processes <= 1:
        return [sys.executable, *module_args]
    return [*torchrun_launcher(processes), *module_args]


def engine_command(spec_path: Path, processes: int = 1, outcome_path: Path | None = None) -> list[str]:
    """The command line of the engine child for one run spec, on `processes` processes of this machine.

    Rank 0 of several writes the run's exit status into `outcome_path` (see `tunedeck.engine.child`).
    """
    child = [*ENGINE_CHILD, "--spec", str(spec_path)]
    if outcome_path is not None:
        child += ["--outcome", str(outcome_path)]
    return launch_command(child, processes)


def ray_engine_command(
    spec_path: Path,
    outcome_path: Path,
    address: str,
    workers: int,
    use_gpu: bool,
    max_failures: int | None = None,
) -> list[str]:
    """The command line of the Ray driver for one run spec (see `tunedeck.engine.ray_launch`)."""
    command = [
        sys.executable, "-m", "tunedeck.engine.ray_launch",
        "--spec", str(spec_path), "--outcome", str(outcome_path),
        "--address", address, "--workers", str(workers),
    ]  # fmt: skip
    if use_gpu:
        command.append("--use-gpu")
    if max_failures is not None:
        command += ["--max-failures", str(max_failures)]
    return command


def written_exit_code(outcome_path: Path) -> int | None:
    """The exit status rank 0 wrote into `outcome_path`; None when it wrote none (no file, or not a status)."""
    try:
        written = json.loads(outcome_path.read_text(encoding="utf-8")).get("exit")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return written if isinstance(written, int) else None


def launched_exit_code(outcome_path: Path, launcher_code: int, *, unreported: int | None = None) -> int:
    """A run's exit status on several processes: the one rank 0 wrote, else the launcher's own.

    torchrun exits 0 when its ranks did, whatever the run's status, and also after a restart that ended
    the run. `unreported`, when given, is the status of a launch that exited 0 without rank 0 writing one.
    """
    written = written_exit_code(outcome_path)
    if written is not None:
        return written
    if launcher_code == 0 and unreported is not None:
        return unreported
    return launcher_code
