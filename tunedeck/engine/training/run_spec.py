"""What a training run is asked to do (`RunSpec`) and how it ended (`RunResult`), both JSON-able.

The spec is the whole input of the child process the worker launches, so it holds paths
and the config only, never live objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tunedeck.config.loading import validate_config
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what `python -m tunedeck.engine.child --spec` reads)."""
        return {
            "config": self.config.model_dump(mode="json", exclude_unset=True),
            "model": {"name": self.model.name, "revision": self.model.revision},
            "train": str(self.train_path),
            "validation": str(self.validation_path) if self.validation_path is not None else None,
            "out": str(self.out_dir),
            "resume_from": str(self.resume_from) if self.resume_from is not None else None,
            "processes": self.processes,
            "cache_dir": str(self.cache_dir) if self.cache_dir is not None else None,
            "oom_restart": self.oom_restart,
            "init_from": str(self.init_from) if self.init_from is not None else None,
            "lineage": self.lineage,
            "job_id": self.job_id,
            "job_name": self.job_name,
            "tracking": self.tracking.to_dict() if self.tracking is not None else None,
            "guards": list(self.guards),
            "system_sample_seconds": self.system_sample_seconds,
            "gradient_checkpointing": (
                self.gradient_checkpointing.to_dict() if self.gradient_checkpointing is not None else None
            ),
        }

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> RunSpec:
        """Parse a spec mapping; a ConfigError names each missing or malformed field."""
        if not isinstance(data, dict):
            raise ConfigError([Issue("the run spec must be a JSON object", file=source)], title="invalid run spec")
        issues = [
            Issue("missing", field=key, file=source, expected=what)
            for key, what in (("model", "an object with name"), ("train", "a path"), ("out", "a path"))
            if not data.get(key)
        ]
        model = data.get("model")
        if isinstance(model, str):
            model = {"name": model}
        if model is not None and not (isinstance(model, dict) and isinstance(model.get("name"), str)):
            issues.append(Issue("malformed", field="model", file=source, expected='{"name": ..., "revision": ...}'))
        if issues:
            raise ConfigError(issues, title="invalid run spec")
        assert isinstance(model, dict)  # checked above; narrows the type
        config = validate_config(data.get("config") or {}, source)

        def optional_path(key: str) -> Path | None:
            value = data.get(key)
            return Path(value) if value else None

        return cls(
            config=config,
            model=ModelRef(model["name"], model.get("revision")),
            train_path=Path(data["train"]),
            out_dir=Path(data["out"]),
            validation_path=optional_path("validation"),
            resume_from=optional_path("resume_from"),
            processes=int(data.get("processes") or 1),
            cache_dir=optional_path("cache_dir"),
            oom_restart=_oom_restart(data.get("oom_restart"), source),
            init_from=optional_path("init_from"),
            lineage=_lineage(data.get("lineage"), source),
            job_id=str(data["job_id"]) if data.get("job_id") else None,
            job_name=str(data["job_name"]) if data.get("job_name") else None,
            tracking=_tracking(data.get("tracking"), source),
            guards=_guards(data.get("guards"), source),
            system_sample_seconds=_sample_seconds(data.get("system_sample_seconds"), source),
            gradient_checkpointing=_checkpointing(data.get("gradient_checkpointing"), source),
        )

    @classmethod
    def read(cls, path: Path) -> RunSpec:
        """Load a spec file."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError([Issue("run spec file not found", file=str(path))], title="invalid run spec") from None
        except json.JSONDecodeError as error:
            raise ConfigError(
                [Issue(f"invalid JSON: {error.msg}", file=str(path), line=error.lineno)],
                title="invalid run spec",
            ) from None
        return cls.from_dict(data, str(path))


def _oom_restart(value: Any, source: str | None) -> dict[str, Any] | None:
    """The spec's `oom_restart`, checked: positive `micro_batch` and `accumulation`, and a list of attempts."""
    if value is None:
        return None
    numbers_ok = isinstance(value, dict) and all(
        isinstance(value.get(key), int) and value[key] >= 1 for key in ("micro_batch", "accumulation")
    )
    if not numbers_ok or not isinstance(value.get("attempts", []), list):
        raise ConfigError(
            [Issue("malformed", field="oom_restart", file=source,
                   expected='{"micro_batch": >= 1, "accumulation": >= 1, "attempts": [...]}')],
            title="invalid run spec",
        )
    return dict(value)


def _checkpointing(value: Any, source: str | None) -> CheckpointingChoice | None:
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


def _tracking(value: Any, source: str | None) -> TrackerDestinations | None:
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


def _guards(value: Any, source: str | None) -> list[str]:
    """The spec's `guards`, checked and in compact form (ConfigError naming `guards[i]` for a bad one)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(
            [Issue("malformed", field="guards", file=source, expected='a list, e.g. ["accuracy >= baseline"]')],
            title="invalid run spec",
        )
    return [str(guard) for guard in parse_guards(value)]


def _lineage(value: Any, source: str | None) -> list[dict[str, Any]] | None:
    """The spec's `lineage`, checked: a list of objects (the base model first, then each ancestor job)."""
    if value is None:
        return None
    if not (isinstance(value, list) and all(isinstance(entry, dict) for entry in value)):
        raise ConfigError(
            [
                Issue(
                    "malformed",
                    field="lineage",
                    file=source,
                    expected='[{"name": ..., "revision": ...}, {"job_id": ..., "checkpoint": ...}, ...]',
                )
            ],
            title="invalid run spec",
        )
    return [dict(entry) for entry in value]


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


def _sample_seconds(value: Any, source: str | None) -> float:
    """The spec's seconds between system samples: a number >= 0, the default when absent."""
    if value is None:
        return DEFAULT_INTERVAL_S
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        issue = Issue("malformed", field="system_sample_seconds", file=source, expected="a number of seconds >= 0")
        raise ConfigError([issue], title="invalid run spec")
    return float(value)
