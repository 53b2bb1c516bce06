"""The run spec file (`spec.json`): the whole input of a run's engine process, as the worker writes it.

The worker (and `tunedeck train`) build a `RunSpecFile`; the engine reads one back with the same
model (`tunedeck.engine.training.run_spec.RunSpec` then checks what only the engine understands:
the training config, the tracker destinations, the guards, the resolved gradient checkpointing).
The keys are those of every spec file written so far; `version` says which contract a file
follows (a file without one is version 1). The file holds paths, the config and the operator's
per-run settings (the simulated memory cap), never a secret nor a live object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator, model_validator

from tunedeck.core.errors import ConfigError, Issue

RUN_SPEC_VERSION = 1
# Fields whose empty value ("" or none) means "not given", as every spec file so far wrote them.
_OPTIONAL_TEXT = ("validation", "resume_from", "cache_dir", "init_from", "job_id", "job_name", "memory_cap")


class ModelName(BaseModel):
    """The base model a run trains: a local folder or a hub id, and the hub revision."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    revision: str | None = None


class OomRestart(BaseModel):
    """Set when every process restarted after one ran out of memory: the micro-batch and accumulation to train
    with now, and the attempts so far (`tunedeck.engine.distributed.group_restart`)."""

    model_config = ConfigDict(extra="allow")

    micro_batch: StrictInt = Field(ge=1)
    accumulation: StrictInt = Field(ge=1)
    attempts: list[Any] = Field(default_factory=list)


class RunSpecFile(BaseModel):
    """The run spec on disk, typed: what the worker writes and the engine reads."""

    model_config = ConfigDict(extra="ignore")

    version: int = Field(RUN_SPEC_VERSION, description=f"the run spec contract's version, at most {RUN_SPEC_VERSION}")
    config: dict[str, Any] = Field(default_factory=dict, description="the job's training config (its JSON keys)")
    model: ModelName = Field(description='an object with name ({"name": ..., "revision": ...})')
    train: str = Field(min_length=1, description="a path (the training data)")
    out: str = Field(min_length=1, description="a path (the run directory)")
    validation: str | None = Field(None, description="a path (the validation data)")
    resume_from: str | None = Field(None, description="a path (the checkpoint to resume from)")
    processes: int = Field(1, ge=1, description="the number of processes, >= 1")
    cache_dir: str | None = Field(None, description="a path (the tokenized-dataset cache; none: no cache)")
    oom_restart: OomRestart | None = Field(
        None, description='{"micro_batch": >= 1, "accumulation": >= 1, "attempts": [...]}'
    )
    init_from: str | None = Field(None, description="a path (the model folder of the job this one starts from)")
    lineage: list[dict[str, Any]] | None = Field(
        None, description='[{"name": ..., "revision": ...}, {"job_id": ..., "checkpoint": ...}, ...]'
    )
    job_id: str | None = Field(None, description="the service's job id")
    job_name: str | None = Field(None, description="the job's name")
    tracking: dict[str, Any] | None = Field(None, description="the tracker destinations of the worker's settings")
    guards: list[Any] = Field(default_factory=list, description='a list, e.g. ["accuracy >= baseline"]')
    system_sample_seconds: float | None = Field(None, ge=0, description="a number of seconds >= 0")
    gradient_checkpointing: dict[str, Any] | None = Field(
        None, description='the resolved choice, {"enabled": true|false, ...}'
    )
    memory_cap: str | None = Field(
        None, description="the simulated memory cap of the operator's settings, a size such as 24GiB"
    )

    @model_validator(mode="before")
    @classmethod
    def _older_forms(cls, data: Any) -> Any:
        """A model given as its name alone; empty optional values and null lists as not given."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if not data.get("model"):
            data.pop("model", None)
        elif isinstance(data["model"], str):
            data["model"] = {"name": data["model"]}
        for key in _OPTIONAL_TEXT:
            if key in data and not data[key]:
                data[key] = None
        for key, empty in (("config", {}), ("guards", [])):
            if key in data and data[key] is None:
                data[key] = empty
        if "processes" in data and not data["processes"]:
            data["processes"] = 1
        return data

    @field_validator("version")
    @classmethod
    def _known_version(cls, version: int) -> int:
        if not 1 <= version <= RUN_SPEC_VERSION:
            raise ValueError(f"version {version} is not one this engine reads (1 to {RUN_SPEC_VERSION})")
        return version

    @field_validator("system_sample_seconds", mode="before")
    @classmethod
    def _seconds_not_a_flag(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("a number of seconds, not true or false")
        return value

    @classmethod
    def parse(cls, data: Any, source: str | None = None) -> RunSpecFile:
        """Validate a spec mapping; a ConfigError names each missing or malformed field."""
        if not isinstance(data, dict):
            raise ConfigError([Issue("the run spec must be a JSON object", file=source)], title="invalid run spec")
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise ConfigError(_issues(error, source), title="invalid run spec") from None

    @classmethod
    def read(cls, path: Path) -> RunSpecFile:
        """Load and validate a spec file."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError([Issue("run spec file not found", file=str(path))], title="invalid run spec") from None
        except json.JSONDecodeError as error:
            raise ConfigError(
                [Issue(f"invalid JSON: {error.msg}", file=str(path), line=error.lineno)], title="invalid run spec"
            ) from None
        return cls.parse(data, str(path))

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object: every key, `null` for what is not given."""
        return self.model_dump(mode="json")

    def write(self, path: Path) -> Path:
        """Write the spec file (indented, as the worker always wrote it); returns `path`."""
        path.write_text(json.dumps(self.to_json(), indent=2), encoding="utf-8")
        return path


def _issues(error: ValidationError, source: str | None) -> list[Issue]:
    """One issue per field: "missing" for a required field absent or empty, else "malformed"."""
    issues: dict[str, Issue] = {}
    for detail in error.errors():
        field = str(detail["loc"][0]) if detail["loc"] else "spec"
        if field in issues:
            continue
        absent = detail["type"] in ("missing", "string_too_short") and len(detail["loc"]) == 1
        info = RunSpecFile.model_fields.get(field)
        expected = info.description if info is not None else None
        message = "missing" if absent else f"malformed ({detail['msg']})"
        issues[field] = Issue(message, field=field, file=source, expected=expected)
    return list(issues.values())
