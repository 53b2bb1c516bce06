"""Wire shapes of `/v1/fine_tuning/jobs`: the create request, and the client's `FineTuningJob`,
`FineTuningJobEvent` and `FineTuningJobCheckpoint` with their pages.

The request's limits are the client's API's: a suffix of at most 64 characters of
`[a-zA-Z0-9_-]`, at most 16 metadata pairs (keys up to 64 characters, values up to 512).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import JsonDict

from tunedeck.api.schemas.common import SEED_MAX, RequestBody

SUFFIX_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
METADATA_PAIRS = 16
METADATA_KEY_CHARS = 64
METADATA_VALUE_CHARS = 512
AUTO = "auto"


class _Body(RequestBody):
    """A part of the request: unknown fields are refused by name, as every tunedeck request body does."""

    model_config = ConfigDict(strict=True, extra="forbid")


def _whole_or_auto(value: Any) -> int | str | None:
    """An integer or `auto` (one error naming both, rather than one per alternative)."""
    if value is None or value == AUTO or (isinstance(value, int) and not isinstance(value, bool)):
        return value  # type: ignore[no-any-return]
    raise ValueError('expected an integer or "auto"')


def _number_or_auto(value: Any) -> float | str | None:
    """A number or `auto`; a whole number is that float, as JSON reads it."""
    if value is None or value == AUTO:
        return value  # type: ignore[no-any-return]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ValueError('expected a number or "auto"')


_WHOLE: JsonDict = {"anyOf": [{"type": "integer"}, {"const": AUTO}, {"type": "null"}]}
_NUMBER: JsonDict = {"anyOf": [{"type": "number"}, {"const": AUTO}, {"type": "null"}]}


class HyperparametersIn(_Body):
    """Hyperparameters of supervised fine-tuning, each a number or `auto` (tunedeck's default for the method)."""

    n_epochs: Any = Field(None, json_schema_extra=_WHOLE)
    batch_size: Any = Field(None, json_schema_extra=_WHOLE)
    learning_rate_multiplier: Any = Field(None, json_schema_extra=_NUMBER)

    @field_validator("n_epochs", "batch_size", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> Any:
        return _whole_or_auto(value)

    @field_validator("learning_rate_multiplier", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        return _number_or_auto(value)


class DpoHyperparametersIn(HyperparametersIn):
    """Hyperparameters of preference tuning (DPO): those of supervised fine-tuning and `beta`."""

    beta: Any = Field(None, json_schema_extra=_NUMBER)

    @field_validator("beta", mode="before")
    @classmethod
    def _beta(cls, value: Any) -> Any:
        return _number_or_auto(value)


class SupervisedIn(_Body):
    """`method.supervised`."""

    hyperparameters: HyperparametersIn | None = None


class DpoIn(_Body):
    """`method.dpo`."""

    hyperparameters: DpoHyperparametersIn | None = None


class MethodIn(_Body):
    """How the job trains: supervised fine-tuning (tunedeck's sft) or DPO (tunedeck's dpo)."""

    type: Literal["supervised", "dpo"]
    supervised: SupervisedIn | None = None
    dpo: DpoIn | None = None


class WandbIn(_Body):
    """Where a Weights & Biases integration reports."""

    project: str = Field(min_length=1, max_length=200)
    entity: str | None = Field(None, max_length=200)
    name: str | None = Field(None, max_length=200)
    tags: list[str] | None = None


class IntegrationIn(_Body):
    """One integration of a job."""

    type: Literal["wandb"]
    wandb: WandbIn


class FineTuningJobCreate(_Body):
    """`POST /v1/fine_tuning/jobs`."""

    model: str = Field(min_length=1, max_length=300, description="A base model's registered name or id.")
    training_file: str = Field(min_length=1, max_length=40, description="A file id (a dataset version).")
    validation_file: str | None = Field(None, min_length=1, max_length=40)
    suffix: str | None = Field(None, pattern=SUFFIX_PATTERN, description="Up to 64 of a-z, A-Z, 0-9, - and _.")
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    metadata: dict[str, str] | None = Field(None, description="Up to 16 pairs: keys ≤ 64, values ≤ 512 characters.")
    hyperparameters: HyperparametersIn | None = None
    method: MethodIn | None = None
    integrations: list[IntegrationIn] | None = None
    config: dict[str, Any] | None = Field(
        None,
        description="tunedeck's own job config keys for what the fields above cannot say (max_length, lora_r, "
        "mixed_precision, ...), sent with the client's `extra_body`; keys the fields above set are refused here.",
    )

    @field_validator("metadata")
    @classmethod
    def _metadata_limits(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        """The client's API's limits on metadata."""
        if value is None:
            return value
        if len(value) > METADATA_PAIRS:
            raise ValueError(f"at most {METADATA_PAIRS} pairs, found {len(value)}")
        for key, text in value.items():
            if len(key) > METADATA_KEY_CHARS:
                raise ValueError(f"key {key[:20]!r}... is longer than {METADATA_KEY_CHARS} characters")
            if len(text) > METADATA_VALUE_CHARS:
                raise ValueError(f"the value of {key!r} is longer than {METADATA_VALUE_CHARS} characters")
        return value


class JobErrorOut(BaseModel):
    """Why a job failed."""

    code: str
    message: str
    param: str | None = None


class FineTuningJobOut(BaseModel):
    """A fine-tuning job: a tunedeck job in the client's shape (`job_mapping` says how each field is made)."""

    id: str
    object: Literal["fine_tuning.job"] = "fine_tuning.job"
    created_at: int
    finished_at: int | None = None
    estimated_finish: int | None = None
    error: JobErrorOut | None = None
    fine_tuned_model: str | None = None
    hyperparameters: dict[str, Any]
    model: str
    organization_id: str
    result_files: list[str] = Field(default_factory=list)
    seed: int
    status: Literal["validating_files", "queued", "running", "succeeded", "failed", "cancelled"]
    trained_tokens: int | None = None
    training_file: str
    validation_file: str | None = None
    integrations: list[dict[str, Any]] | None = None
    metadata: dict[str, str] | None = None
    method: dict[str, Any] | None = None


class FineTuningJobList(BaseModel):
    """A page of jobs, newest first; the next page is `after` = the last id while `has_more`."""

    object: Literal["list"] = "list"
    data: list[FineTuningJobOut]
    has_more: bool = False


class JobEventOut(BaseModel):
    """One event of a job: a message, or training metrics at a step (`type` "metrics")."""

    id: str
    object: Literal["fine_tuning.job.event"] = "fine_tuning.job.event"
    created_at: int
    level: Literal["info", "warn", "error"]
    message: str
    type: Literal["message", "metrics"] = "message"
    data: dict[str, Any] | None = None


class JobEventList(BaseModel):
    """A page of events, newest first; the next page is `after` = the last id while `has_more`."""

    object: Literal["list"] = "list"
    data: list[JobEventOut]
    has_more: bool = False


class CheckpointOut(BaseModel):
    """A committed checkpoint of a job, usable as a model by its `fine_tuned_model_checkpoint` name."""

    id: str
    object: Literal["fine_tuning.job.checkpoint"] = "fine_tuning.job.checkpoint"
    created_at: int
    fine_tuned_model_checkpoint: str
    fine_tuning_job_id: str
    metrics: dict[str, float]
    step_number: int


class CheckpointList(BaseModel):
    """A page of checkpoints, newest first; the next page is `after` = the last id while `has_more`."""

    object: Literal["list"] = "list"
    data: list[CheckpointOut]
    has_more: bool = False
    first_id: str | None = None
    last_id: str | None = None
