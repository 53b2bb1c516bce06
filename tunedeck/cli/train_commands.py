"""`tunedeck train`: one training run from the command line: the checks before training, then a live progress bar."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from tunedeck.cli.errors import reported_errors
from tunedeck.config.distribution import placement
from tunedeck.config.training import TrainingConfig
from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import ConfigError, Issue, TunedeckError
from tunedeck.core.exit_codes import ExitCode
from tunedeck.core.rundir import RunDir
from tunedeck.core.settings import Settings

console = Console()
# The hidden option through which `relaunch_on_processes` tells each rank where rank 0 reports the run's status.
RANKS_OUTCOME_OPTION = "--ranks-outcome"


class RichProgress:
    """Shows step, loss, learning rate, tokens/s and ETA as the engine reports them."""

    def __init__(self) -> None:
        self._progress = Progress(
            TextColumn("[bold]step[/bold]"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task: Any = None
        self._stats: dict[str, Any] = {}

    def start(self, total_steps: int, first_step: int) -> None:
        """Open the bar (at `first_step` when resuming)."""
        self._progress.start()
        self._task = self._progress.add_task("train", total=total_steps, completed=first_step, stats="")

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        """Advance to `step` and refresh the figures."""
        self._stats.update({key: value for key, value in metrics.items() if value is not None})
        parts = []
        if "loss" in self._stats:
            parts.append(f"loss {self._stats['loss']:.4f}")
        if "learning_rate" in self._stats:
            parts.append(f"lr {self._stats['learning_rate']:.2e}")
        if "tokens_per_second" in self._stats:
            parts.append(f"{self._stats['tokens_per_second']:,.0f} tok/s")
        if "eval_loss" in self._stats:
            parts.append(f"eval_loss {self._stats['eval_loss']:.4f}")
        # A preference run: how far the chosen answers lead, and how often they do.
        if "rewards/margins" in self._stats:
            parts.append(f"margin {self._stats['rewards/margins']:.3f}")
        if "rewards/accuracies" in self._stats:
            parts.append(f"reward acc {self._stats['rewards/accuracies']:.2f}")
        if self._task is not None:
            self._progress.update(self._task, completed=step, stats="  ".join(parts))

    def finish(self) -> None:
        """Close the bar."""
        self._progress.stop()


def train(
    config: Path = typer.Option(..., "--config", help="JSON training config (the job config keys)."),
    model: str = typer.Option(..., "--model", help="Local model folder or hub id."),
    revision: str | None = typer.Option(None, "--revision", help="Hub branch, tag or commit (hub ids only)."),
    train_file: Path = typer.Option(..., "--train", help="Training data (JSONL, JSON, CSV or Parquet)."),
    validation: Path | None = typer.Option(None, "--validation", help="Validation data; enables evaluation."),
    out: Path = typer.Option(..., "--out", help="Run directory to create (or to continue, with --resume-from)."),
    resume_from: Path | None = typer.Option(None, "--resume-from", help="Checkpoint folder to continue from."),
    init_from: Path | None = typer.Option(
        None,
        "--init-from",
        help="Start from an earlier run's model trained on the same base: its final/ or a checkpoint folder "
        "(an adapter is trained on, or merged for a full fine-tune; full weights replace the base's).",
    ),
    cache_dir: Path | None = typer.Option(
        None, "--cache-dir", help="Tokenized-dataset cache [default: TUNEDECK_CACHE_DIR or <data dir>/cache/tokenized]."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Tokenize again and cache nothing."),
    ranks_outcome: Path | None = typer.Option(
        None, RANKS_OUTCOME_OPTION, hidden=True, help="File rank 0 writes the exit status into (set by the relaunch)."
    ),
) -> None:
    """Train a LoRA adapter or a full fine-tune and write the run directory."""
    from tunedeck.config.loading import load_config_file
    from tunedeck.engine.distributed.ranks import current_ranks

    started = time.monotonic()
    with reported_errors():
        loaded = load_config_file(config)
        relaunched = relaunch_on_processes(loaded)
        if relaunched is not None:
            raise typer.Exit(relaunched)
        spec = _run_spec(loaded, model, revision, train_file, out, validation, resume_from, init_from,
                         cache_dir, no_cache)  # fmt: skip
        ranks = current_ranks()
        spec = _spec_after_restart(spec, ranks_outcome, ranks)
        result = _train_once(spec, ranks)
        # The command's own statuses: any other ending (cancelled, failed) exits 4, as it always has.
        code = {"succeeded": ExitCode.SUCCEEDED, "paused": ExitCode.PAUSED}.get(result.status, ExitCode.CANCELLED)
        if ranks.is_main and ranks_outcome is not None:
            write_json_atomic(ranks_outcome, {"exit": code})
    if not ranks.is_main:
        return  # rank 0 prints the summary of a run on several processes
    _print_result(result, started)
    if code != 0:
        raise typer.Exit(code)


def _run_spec(
    loaded: Any,
    model: str,
    revision: str | None,
    train_file: Path,
    out: Path,
    validation: Path | None,
    resume_from: Path | None,
    init_from: Path | None,
    cache_dir: Path | None,
    no_cache: bool,
) -> Any:
    """The run spec of this command's options, with what the settings add (cache, trackers, memory cap)."""
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.training.run_spec import RunSpec

    settings = Settings()  # type: ignore[call-arg]  # fields come from TUNEDECK_* variables
    spec = RunSpec(
        config=loaded,
        model=ModelRef(model, revision),
        train_path=train_file,
        out_dir=out,
        validation_path=validation,
        resume_from=resume_from,
        init_from=init_from,
        cache_dir=None if no_cache else (cache_dir or settings.resolved_cache_dir()),
        tracking=settings.tracker_destinations() if loaded.report_to else None,
        memory_cap=settings.memory_cap,
    )
    if loaded.report_to:
        # This process is the engine: the trackers' secrets (the W&B API key) go into its own environment.
        os.environ.update(settings.tracker_environment())
    return spec


def _spec_after_restart(spec: Any, outcome: Path | None, ranks: Any) -> Any:
    """The spec a restarted process group runs (a smaller micro-batch after an out-of-memory), else `spec`."""
    from tunedeck.engine.distributed.group_restart import restarted, spec_after_restart
    from tunedeck.engine.distributed.ranks import device_type_of
    from tunedeck.engine.host.hardware import detect_hardware
    from tunedeck.engine.training.run_spec import RunSpec

    if not (ranks.distributed and restarted()):
        return spec
    decided = spec_after_restart(spec.to_dict(), outcome, ranks, rerun_lost_group=False,
                                 device_type=device_type_of(detect_hardware().backend))  # fmt: skip
    if decided is None:
        raise typer.Exit(0)  # the try before ended the run; the outcome file says how
    return RunSpec.from_dict(decided)


def _train_once(spec: Any, ranks: Any) -> Any:
    """The checks before training, then the run; a rank's out-of-memory restart request exits 1."""
    from tunedeck.engine.preflight.phase import PreflightFailedError
    from tunedeck.engine.training.oom_retry import GroupRestartError
    from tunedeck.engine.training.training_run import run_training

    try:
        spec, preflight = checked_before_training(spec, ranks)
        return run_training(spec, progress=RichProgress(), preflight=preflight, ranks=ranks)
    except PreflightFailedError:
        raise  # refused before training: the table shows every check, the error names the failed ones
    except TunedeckError as error:
        if not (ranks.distributed and RunDir(spec.out_dir).oom_restart.is_file()):
            raise
        # A rank ran out of memory and asked for a restart; a peer's failure is its consequence.
        if isinstance(error, GroupRestartError):
            console.print(f"{error}: restarting every process", markup=False)
        raise typer.Exit(1) from None


def _print_result(result: Any, started: float) -> None:
    """The run's summary table: directory, steps, losses, parameters, final model, best checkpoint, metrics."""
    table = Table("", "", title=f"run {result.status}", show_header=False)
    rows: list[tuple[str, Any]] = [
        ("run directory", result.run_dir),
        ("steps", f"{result.global_step} / {result.total_steps}"),
        ("first → last loss", _loss_span(result.first_loss, result.last_loss)),
        ("mean training loss", _number(result.train_loss)),
        ("trainable / total parameters", _params(result.model)),
        ("final model", result.final_path or "-"),
        ("best checkpoint", result.best_checkpoint or "-"),
        ("stopped early", "yes" if result.stopped_early else "no"),
        ("loss normalised", result.loss_normalisation or "-"),
        ("wall time", f"{time.monotonic() - started:.1f} s"),
    ]
    rows += [(key, _number(value)) for key, value in sorted(result.eval_metrics.items())]
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)


def checked_before_training(spec: Any, ranks: Any) -> tuple[Any, dict[str, Any] | None]:
    """The checks before training, as a job's engine child runs them (`checks_before_training`), shown as a table.

    A new run is checked unless its config says `preflight: false`; a resumed run only when it
    resumes on another platform. A failed check refuses the run: its table is shown, then the error,
    and a run folder the checks created for their report is removed again.
    """
    from tunedeck.cli.checks_report import render
    from tunedeck.engine.preflight.before_training import checks_before_training
    from tunedeck.engine.preflight.phase import PreflightFailedError

    fresh = not Path(spec.out_dir).exists()
    try:
        spec, report = checks_before_training(spec, ranks)
    except PreflightFailedError as error:
        if ranks.is_main:
            render(error.report.to_dict())
            if fresh:
                # The table is this refusal's record; the folder the checks made stays free for the next try.
                shutil.rmtree(spec.out_dir, ignore_errors=True)
        raise
    if report is not None and ranks.is_main:
        if report.get("reason"):
            console.print(f"checking again before training: {report['reason']}", markup=False)
        render(report)
    return spec, report


def relaunch_on_processes(config: TrainingConfig) -> int | None:
    """Run this very command under torchrun when `config` asks for several processes; its exit status.

    None when the command should train here: one process, or already one rank of a launcher.
    A config that asks for the CPU only (`devices: 0`) shows the ranks no accelerator.
    """
    from tunedeck.core.launcher import launch_command, launched_exit_code

    where = placement(config)
    if where.processes <= 1 or "WORLD_SIZE" in os.environ:
        return None
    if where.machines > 1:
        raise ConfigError([Issue(
            "several machines run through a worker in front of a Ray cluster (tunedeck worker --ray-address)",
            field="machines",
        )])
    with tempfile.TemporaryDirectory(prefix="tunedeck-ranks-") as folder:
        outcome = Path(folder) / "outcome.json"
        # Each rank runs this very command, told where rank 0 reports the run's status.
        command = launch_command(
            ["-m", "tunedeck.cli.main", *sys.argv[1:], RANKS_OUTCOME_OPTION, str(outcome)], where.processes
        )
        env = {**os.environ, **({"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""} if where.hide_devices else {})}
        console.print(f"training on {where.processes} processes (torchrun)")
        launched = subprocess.run(command, env=env, check=False).returncode
        # Rank 0's status; after a restart that ended the run, the launcher itself exits 0.
        return launched_exit_code(outcome, launched)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _loss_span(first: float | None, last: float | None) -> str:
    if first is None or last is None:
        return "-"
    return f"{first:.4f} → {last:.4f}"


def _params(model: dict[str, Any]) -> str:
    trainable, total = model.get("trainable_parameters"), model.get("total_parameters")
    if not trainable or not total:
        return "-"
    return f"{trainable:,} / {total:,} ({trainable / total:.2%})"
