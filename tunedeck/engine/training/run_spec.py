"""What a training run is asked to do (`RunSpec`) and how it ended (`RunResult`), both JSON-able.

The spec is the whole input of the child process the worker launches; its file is the typed
contract `tunedeck.core.run_spec.RunSpecFile`, which this module reads into the engine's own
types (the validated training config, the model reference, the tracker destinations, the guards).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tunedeck.config.loading import validate_config
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.run_spec import ModelName, OomRestart, RunSpecFile
from tunedeck.core.tracker_destinations import TrackerDestinations
from tunedeck.engine.host.system_sampler import DEFAULT_INTERVAL_S
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.training.checkpointing_choice import CheckpointingChoice
from tunedeck.eval.guards import parse_guards

RunStatus = Literal["succeeded", "paused", "cancelled", "failed"]


@dataclass
class RunSpec:
    """One training run: config, base model, data files, run directory, optional checkpoint to resume."""

    config: TrainingConfig
    model: ModelRef
    train_path: Path
    out_dir: Path
    validation_path: Path | None = None
    resume_from: Path | None = None
    processes: int = 1
    cache_dir: Path | None = None  # tokenized-dataset cache shared by runs; None: no cache
    # Set when every process restarted after one ran out of memory: the micro-batch, accumulation
    # and attempts so far (`tunedeck.engine.distributed.group_restart`).
    oom_restart: dict[str, Any] | None = None
    # The model folder of the job this one starts from (`init_from_job`), downloaded by the worker;
    # None: start from the base model.
    init_from: Path | None = None
    # The pin chain so far, oldest first: the base model, then one entry per ancestor job
    # (`tunedeck.engine.models.init_from` describes the entries). None without `init_from`.
    lineage: list[dict[str, Any]] | None = None
    job_id: str | None = None  # the service's job this run trains (named in the pin chain); None from the CLI
    job_name: str | None = None  # its name, for the runs of the trackers it reports to
    # Where the trackers of the config's report_to write (the operator's settings); None: under the run's
    # parent folder. Never holds a secret.
    tracking: TrackerDestinations | None = None
    # The job's guards (what must not degrade), in compact form: the final model is checked against them.
    guards: list[str] = field(default_factory=list)
    # Seconds between the run's system samples (host and device readings; 0: none), the worker's setting.
    system_sample_seconds: float = DEFAULT_INTERVAL_S
    # `gradient_checkpointing: "auto"` as the checks before training resolved it from the measured step;
    # None: not resolved there (the run then applies `run_checkpointing`'s rule).
    gradient_checkpointing: CheckpointingChoice | None = None

    # The simulated memory cap of the operator's settings (`TUNEDECK_MEMORY_CAP`), a size such as 24GiB;
    # None: the device's own memory bounds the run.
    memory_cap: str | None = None

    def to_file(self) -> RunSpecFile:
        """The spec as the typed file contract (`tunedeck.core.run_spec`)."""
        return RunSpecFile(
            config=self.config.model_dump(mode="json", exclude_unset=True),
            model=ModelName(name=self.model.name, revision=self.model.revision),
            train=str(self.train_path),
            validation=_text(self.validation_path),
            out=str(self.out_dir),
            resume_from=_text(self.resume_from),
            processes=self.processes,
            cache_dir=_text(self.cache_dir),
            oom_restart=OomRestart.model_validate(self.oom_restart) if self.oom_restart is not None else None,
            init_from=_text(self.init_from),
            lineage=self.lineage,
            job_id=self.job_id,
            job_name=self.job_name,
            tracking=self.tracking.to_dict() if self.tracking is not None else None,
            guards=list(self.guards),
            system_sample_seconds=self.system_sample_seconds,
            gradient_checkpointing=(
                self.gradient_checkpointing.to_dict() if self.gradient_checkpointing is not None else None
            ),
            memory_cap=self.memory_cap,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what `python -m tunedeck.engine.child --spec` reads)."""
        return self.to_file().to_json()

    @classmethod
    def from_file(cls, spec: RunSpecFile, source: str | None = None) -> RunSpec:
        """The engine's spec from the typed file: the config, trackers, guards and checkpointing choice checked."""
        return cls(
            config=validate_config(spec.config, source),
            model=ModelRef(spec.model.name, spec.model.revision),
            train_path=Path(spec.train),
            out_dir=Path(spec.out),
            validation_path=_path(spec.validation),
            resume_from=_path(spec.resume_from),
            processes=spec.processes,
            cache_dir=_path(spec.cache_dir),
            oom_restart=spec.oom_restart.model_dump() if spec.oom_restart is not None else None,
            init_from=_path(spec.init_from),
            lineage=spec.lineage,
            job_id=spec.job_id,
            job_name=spec.job_name,
            tracking=_tracking(spec.tracking, source),
            guards=_guards(spec.guards),
            system_sample_seconds=(
                DEFAULT_INTERVAL_S if spec.system_sample_seconds is None else spec.system_sample_seconds
            ),
            gradient_checkpointing=_checkpointing(spec.gradient_checkpointing, source),
            memory_cap=spec.memory_cap,
        )

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> RunSpec:
        """Parse a spec mapping; a ConfigError names each missing or malformed field."""
        return cls.from_file(RunSpecFile.parse(data, source), source)

    @classmethod
    def read(cls, path: Path) -> RunSpec:
        """Load a spec file."""
        return cls.from_file(RunSpecFile.read(path), str(path))


def _text(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _path(text: str | None) -> Path | None:
    return Path(text) if text else None


def _checkpointing(value: dict[str, Any] | None, source: str | None) -> CheckpointingChoice | None:
    """The spec's resolved `gradient_checkpointing`, checked."""
    if value is None:
        return None
    try:
        return CheckpointingChoice.from_dict(value)
    except ValueError as error:
        raise ConfigError(
            [Issue("malformed", field="gradient_checkpointing", file=source,
                   expected=str(error).removeprefix("expected "))],
            title="invalid run spec",
        ) from None


def _tracking(value: dict[str, Any] | None, source: str | None) -> TrackerDestinations | None:
    """The spec's `tracking`, checked: every tracker destination the worker writes."""
    if value is None:
        return None
    try:
        return TrackerDestinations.from_dict(value)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ConfigError(
            [Issue(f"malformed ({error})", field="tracking", file=source,
                   expected="the tracker destinations of the worker's settings")],
            title="invalid run spec",
        ) from None


def _guards(value: list[Any]) -> list[str]:
    """The spec's `guards` in compact form (ConfigError naming `guards[i]` for a bad one)."""
    return [str(guard) for guard in parse_guards(value)]


@dataclass
class RunResult:
    """How a run ended; also written as results.json."""

    status: RunStatus
    run_dir: Path
    global_step: int
    total_steps: int
    train_loss: float | None = None
    first_loss: float | None = None
    last_loss: float | None = None
    eval_metrics: dict[str, Any] = field(default_factory=dict)
    best_checkpoint: str | None = None
    best_metric: float | None = None
    final_path: Path | None = None
    stopped_early: bool = False
    runtime_seconds: float = 0.0
    model: dict[str, Any] = field(default_factory=dict)
    diagnostics: dict[str, Any] = field(default_factory=dict)  # training speed split, OOM retries
    # How the loss of an optimizer step was normalised over its accumulated micro-batches (`loss_normalisation`).
    loss_normalisation: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "status": self.status,
            "run_dir": str(self.run_dir),
            "global_step": self.global_step,
            "total_steps": self.total_steps,
            "train_loss": self.train_loss,
            "first_loss": self.first_loss,
            "last_loss": self.last_loss,
            "eval_metrics": self.eval_metrics,
            "best_checkpoint": self.best_checkpoint,
            "best_metric": self.best_metric,
            "final_path": str(self.final_path) if self.final_path is not None else None,
            "stopped_early": self.stopped_early,
            "runtime_seconds": round(self.runtime_seconds, 3),
            "model": self.model,
            "diagnostics": self.diagnostics,
            "loss_normalisation": self.loss_normalisation,
        }

