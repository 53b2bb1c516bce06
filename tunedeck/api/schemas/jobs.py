"""Training-job requests and responses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonDict

from tunedeck.api.schemas.common import Page, RequestBody
from tunedeck.api.schemas.config import ConfigKeys
from tunedeck.api.schemas.experiments import Guards
from tunedeck.core.states import JobState
from tunedeck.store.job_tags import MAX_TAGS, TAG_PATTERN, TAG_RULE

TAGS_DESCRIPTION = f"Labels to find the job by (not training config): at most {MAX_TAGS}, each {TAG_RULE}."
# The tag rules as the schema documents them; they are checked by the job store, whose 422 names each bad tag.
TAGS_SCHEMA: JsonDict = {"maxItems": MAX_TAGS, "items": {"type": "string", "pattern": TAG_PATTERN}}


class JobCreate(RequestBody):
    """A new training job; `config` is validated by the same TrainingConfig as the CLI.

    Dataset references take a dataset id (its newest version is used) or a
    dataset version id (`dsv_...`); the job records the version.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=200)
    base_model_id: str = Field(..., min_length=1, max_length=40)
    train_dataset_id: str = Field(..., min_length=1, max_length=40)
    validation_dataset_id: str | None = Field(None, min_length=1, max_length=40)
    config: ConfigKeys = Field(
        default_factory=dict, description="The job config keys; unknown keys and bad values are refused by name."
    )
    experiment_id: str | None = Field(
        None, min_length=1, max_length=40, description="Experiment this variant belongs to."
    )
    priority: int = Field(
        0, ge=-100, le=100, description="Higher runs first; first in, first out within one. Above 0: admins only."
    )
    devices_needed: int | None = Field(
        None,
        ge=0,
        le=64,
        description="Accelerators the job reserves on its worker; by default the config's devices "
        '(0 for "auto", which keeps the worker\'s view without reserving).',
    )
    guards: Guards = Field(
        default_factory=list,
        max_length=50,
        json_schema_extra={"maxItems": 50},  # the guard forms' own schema replaces the one max_length writes
        description='What must not degrade, checked in the job report: "json_valid_rate >= baseline", '
        '"per_class.spam.f1 >= 0.8", or {"metric", "comparator", "threshold", "tolerance"} objects.',
    )
    # Checked by the tag rules (422 naming `tags[i]`) rather than here, so the error says what a tag is.
    tags: list[str] = Field(default_factory=list, description=TAGS_DESCRIPTION, json_schema_extra=TAGS_SCHEMA)


class JobTagsIn(RequestBody):
    """The whole new set of a job's tags (an empty list removes them all)."""

    model_config = ConfigDict(extra="forbid")

    tags: list[str] = Field(..., description=TAGS_DESCRIPTION, json_schema_extra=TAGS_SCHEMA)


class JobClone(RequestBody):
    """A new job copied from an existing one, with config changes re-validated as a whole."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=200)
    config: ConfigKeys = Field(default_factory=dict, description="Keys to change in the copied config.")
    priority: int | None = Field(None, ge=-100, le=100)
    replace_config: bool = Field(
        False,
        description="`config` is the clone's whole config: a key it leaves out takes its default "
        "instead of the source's value (what the dashboard's clone form sends).",
    )
    base_model_id: str | None = Field(
        None, min_length=1, max_length=40, description="Train from this base model instead of the source's."
    )
    train_dataset_id: str | None = Field(
        None,
        min_length=1,
        max_length=40,
        description="Train on this dataset (its newest version) or dataset version instead of the source's.",
    )


class JobOut(BaseModel):
    """A training job as stored."""

    id: str
    name: str
    state: JobState
    priority: int
    devices_needed: int
    base_model_id: str | None
    train_dataset_version_id: str | None
    validation_dataset_version_id: str | None
    config: dict[str, Any]
    attempt: int
    requested_action: str | None = None
    resume_from_step: int | None = None
    error: str | None = None
    diagnosis: dict[str, Any] | None = None
    cloned_from: str | None = None
    experiment_id: str | None = None
    tags: list[str] = Field(default_factory=list, description="The job's tags, sorted.")
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    waiting_for: str | None = Field(
        None, description="For a queued job: the owner's quota it waits on (a limit and its use), if any."
    )
    checkpoints_pruned_after: datetime | None = Field(
        None, description="When a retention policy deletes its checkpoints but the best and the newest (null: never)."
    )
    deleted_after: datetime | None = Field(
        None, description="When a retention policy deletes the whole job (null: not scheduled)."
    )


JobPage = Page[JobOut]
