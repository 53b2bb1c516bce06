"""The worker's entry point for one run in its own process: `python -m tunedeck.engine.child --spec FILE`.

Exit status tells the supervisor what happened without parsing output: 0 succeeded,
3 paused (a checkpoint was written), 4 cancelled, 2 refused before training (bad input:
never worth retrying), 1 failed during training (a diagnosis event says why).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType

from tunedeck.core.errors import TunedeckError
from tunedeck.core.events import EventType, EventWriter
from tunedeck.core.rundir import RunDir

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2
EXIT_PAUSED = 3
EXIT_CANCELLED = 4
_EXIT_BY_STATUS = {"succeeded": EXIT_SUCCEEDED, "paused": EXIT_PAUSED, "cancelled": EXIT_CANCELLED}


def main(argv: list[str] | None = None) -> int:
    """Run the spec in `--spec` and return the exit status."""
    from tunedeck.engine.training.run import RunFailedError, run_training
    from tunedeck.engine.training.run_spec import RunSpec

    parser = argparse.ArgumentParser(prog="python -m tunedeck.engine.child")
    parser.add_argument("--spec", required=True, type=Path, help="JSON run spec")
    args = parser.parse_args(argv)
    run_dir: RunDir | None = None
    try:
        spec = RunSpec.read(args.spec)
        run_dir = RunDir(spec.out_dir)
        _pause_on_termination(run_dir)
        preflight = None
        if spec.config.preflight and spec.resume_from is None:
            # The job's first phase (the checks before training): a failed check refuses the job before training;
            # the memory-fit decision it makes is applied to the run. A resumed run passed it already.
            from tunedeck.engine.preflight import preflight_for_run

            spec, report = preflight_for_run(spec)
            preflight = report.to_dict()
        result = run_training(spec, preflight=preflight)
    except RunFailedError as error:  # the run directory already holds the diagnosis
        print(f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except TunedeckError as error:  # refused on bad input before training
        _report(run_dir, "refused", error)
        return EXIT_REFUSED
    except Exception as error:  # a crash still leaves a diagnosis for the supervisor
        _report(run_dir, "error", error)
        return EXIT_FAILED
    print(json.dumps(result.to_dict()), flush=True)
    return _EXIT_BY_STATUS.get(result.status, EXIT_FAILED)


def _pause_on_termination(run_dir: RunDir) -> None:
    """SIGTERM or SIGINT: checkpoint at the end of the step and exit as paused, instead of dying mid-step.

    A service manager (systemd, a terminal's Ctrl-C) signals the worker's whole process
    group; the worker drains by asking this run to pause, so the run must live long
    enough to write that checkpoint. The request is the supervisor's own stop file.
    """

    def _request_pause(signum: int, frame: FrameType | None) -> None:
        if run_dir.stop_request.is_file():
            return  # a pause or cancel the supervisor asked for already stands
        # Before the run directory exists the file waits in the bare folder (create_run_dir keeps it).
        run_dir.root.mkdir(parents=True, exist_ok=True)
        run_dir.stop_request.write_text("pause", encoding="utf-8")

    signal.signal(signal.SIGTERM, _request_pause)
    signal.signal(signal.SIGINT, _request_pause)


def _report(run_dir: RunDir | None, kind: str, error: BaseException) -> None:
    message = f"{type(error).__name__}: {error}"
    print(message, file=sys.stderr, flush=True)
    if run_dir is None or not run_dir.events.is_file():
        return  # no run directory was made (a refused new run leaves nothing behind)
    with EventWriter(run_dir.events) as events:
        events.emit(EventType.DIAGNOSIS, kind=kind, message=message, advice=[])


if __name__ == "__main__":
    sys.exit(main())
