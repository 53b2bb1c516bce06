"""The Ray driver of one run across machines: `python -m tunedeck.engine.ray_launch --spec FILE --outcome FILE
--address HOST:PORT --workers N [--use-gpu] [--max-failures K]`.

The worker launches this process as it launches `tunedeck.engine.child` (it never imports
Ray's training side or torch itself). It joins the Ray cluster at `--address`, runs a Ray
Train `TorchTrainer` with N workers (one per device, or per process on the CPU), each running
one rank of the spec (`tunedeck.engine.distributed.ray_train`), and exits with the run's
status as `tunedeck.engine.child` does: 0 succeeded, 1 failed, 2 refused, 3 paused,
4 cancelled; and 5 (`ExitCode.REQUEUE`) when the cluster could not run it (Ray missing, the
cluster unreachable or too small, the group lost before its first checkpoint), which is not
the job's fault: the worker gives it back to the queue. Rank 0 writes the status into
`--outcome` too; the driver writes it there when no rank could.

Ray keeps its own run state under `--storage` (default: `ray/` beside the spec, in the
attempt's folder); the checkpoints and events stay in tunedeck's run directory, which the
worker commits to its storage and its database as for any run. A lost worker or node makes
Ray restart the group up to `--max-failures` times; each restart resumes from the newest
complete checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import TunedeckError
from tunedeck.core.events import EventType, EventWriter
from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.rundir import RunDir
from tunedeck.engine.distributed.ray_connect import RayUnavailableError, alive_nodes, connect
from tunedeck.engine.termination import pause_on_termination

DEFAULT_MAX_FAILURES = 3


def main(argv: list[str] | None = None) -> int:
    """Run the spec on the Ray cluster; the run's exit status (see the module docstring)."""
    args = _parser().parse_args(argv)
    spec_path, outcome_path = args.spec.resolve(), args.outcome.resolve()
    outcome_path.unlink(missing_ok=True)  # only this launch's status may be read back
    try:
        run_dir = _run_dir_of(spec_path)
        # The ranks run on the cluster, out of reach of this process's signals: the stop file reaches them.
        pause_on_termination(run_dir)
        ray = connect(args.address)
    except RayUnavailableError as error:
        return _give_up(outcome_path, ExitCode.REQUEUE, str(error))
    except TunedeckError as error:
        return _give_up(outcome_path, ExitCode.REFUSED, str(error))
    try:
        _check_capacity(ray, args.workers, args.use_gpu, args.cpus_per_worker)
        failure = _fit(_trainer(args, spec_path, outcome_path))
    except RayUnavailableError as refused:
        return _give_up(outcome_path, ExitCode.REQUEUE, str(refused))
    finally:
        ray.shutdown()
    code = _read_exit(outcome_path)
    if failure is not None:
        message = f"the Ray Train run failed, restarts included (at most {args.max_failures}): {failure}"
        if code is None:
            # Rank 0 never told how the run ended: this is the only diagnosis the job will have.
            _diagnose(run_dir, message)
        return _give_up(outcome_path, ExitCode.FAILED, message)
    if code is None:
        return _give_up(outcome_path, ExitCode.FAILED, "the Ray Train run ended without rank 0 writing its outcome")
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tunedeck.engine.ray_launch")
    parser.add_argument("--spec", required=True, type=Path, help="JSON run spec (its paths absolute)")
    parser.add_argument("--outcome", required=True, type=Path, help="file the run's exit status is written into")
    parser.add_argument("--address", required=True, help="the Ray cluster: host:port of its head, or auto")
    parser.add_argument("--workers", required=True, type=int, help="Ray Train workers: one per device (or process)")
    parser.add_argument("--use-gpu", action="store_true", help="one GPU per worker (NCCL); else the CPU (gloo)")
    parser.add_argument(
        "--max-failures", type=int, default=DEFAULT_MAX_FAILURES, help="restarts of a lost group (-1: no limit)"
    )
    parser.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs each worker reserves")
    parser.add_argument("--storage", type=Path, help="Ray's run state [default: ray/ beside the spec]")
    return parser


def _run_dir_of(spec_path: Path) -> RunDir:
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise TunedeckError(f"{spec_path}: cannot read the run spec: {error}") from None
    if not isinstance(spec, dict) or not spec.get("out"):
        raise TunedeckError(f"{spec_path}: the run spec names no run directory (out)")
    out = Path(spec["out"])
    if not out.is_absolute():
        # Ray runs each worker in a folder of its own: a relative path would mean another place there.
        raise TunedeckError(f"{spec_path}: the run directory must be an absolute path, found {out}")
    return RunDir(out)


def _check_capacity(ray: Any, workers: int, use_gpu: bool, cpus_per_worker: float) -> None:
    """Refuse a group the cluster cannot hold at all (Ray Train would wait for it for ever)."""
    nodes = alive_nodes(ray)
    if use_gpu:
        # One GPU per worker, and each worker on one node: count whole GPUs node by node.
        fits = sum(int(node.gpus) for node in nodes)
        what = "GPUs"
    else:
        fits = sum(int(node.cpus // cpus_per_worker) for node in nodes if cpus_per_worker > 0)
        what = f"workers of {cpus_per_worker:g} CPU"
    if fits < workers:
        raise RayUnavailableError(
            f"the Ray cluster has room for {fits} {what} on {len(nodes)} node(s); the run needs {workers}"
        )


def _trainer(args: argparse.Namespace, spec_path: Path, outcome_path: Path) -> Any:
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from tunedeck.engine.distributed.ray_train import train_loop_per_worker

    resources: dict[str, float] = {"CPU": args.cpus_per_worker}
    if args.use_gpu:
        resources["GPU"] = 1
    storage = (args.storage or spec_path.parent / "ray").resolve()
    storage.mkdir(parents=True, exist_ok=True)
    return TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"spec": str(spec_path), "outcome": str(outcome_path)},
        scaling_config=ScalingConfig(num_workers=args.workers, use_gpu=args.use_gpu, resources_per_worker=resources),
        run_config=RunConfig(
            name=_run_name(spec_path),
            storage_path=str(storage),
            failure_config=FailureConfig(max_failures=args.max_failures),
        ),
    )


def _run_name(spec_path: Path) -> str:
    """Ray's name for the run: the job and attempt folders the spec lies in (runs/<job>/attempt-<n>/spec.json)."""
    parts = [part for part in (spec_path.parent.parent.name, spec_path.parent.name) if part]
    return "tunedeck-" + "-".join(parts)


def _fit(trainer: Any) -> BaseException | None:
    """Run `trainer.fit()`; the error it ended with, if any.

    In a thread of its own: Ray Train installs its own Ctrl-C handler (abort the run at once)
    when it runs in the main thread, and this process wants a pause at the next step instead.
    """
    failure: list[BaseException] = []

    def _run() -> None:
        try:
            trainer.fit()
        except BaseException as error:  # reported by the main thread
            failure.append(error)

    thread = threading.Thread(target=_run, name="ray-train-fit", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(timeout=0.5)  # wakes up now and then so the main thread can run signal handlers
    return failure[0] if failure else None


def _read_exit(outcome_path: Path) -> int | None:
    try:
        value = json.loads(outcome_path.read_text(encoding="utf-8")).get("exit")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def _diagnose(run_dir: RunDir, message: str) -> None:
    """A diagnosis event in the run's events, for the job's page (only when the run directory exists)."""
    if not run_dir.events.is_file():
        return
    advice = [
        "Check that every node of the Ray cluster is up and sees the worker's runs folder at the same path.",
        "Resume the job: it continues from its newest committed checkpoint.",
    ]
    with EventWriter(run_dir.events) as events:
        events.emit(EventType.DIAGNOSIS, kind="crash", message=message, advice=advice)


def _give_up(outcome_path: Path, code: int, message: str) -> int:
    """Report `message` on stderr (one line, no traceback), record `code` as the outcome, return it."""
    print(f"ray_launch: {message}", file=sys.stderr, flush=True)
    write_json_atomic(outcome_path, {"exit": code, "error": message})
    return code


if __name__ == "__main__":
    sys.exit(main())
