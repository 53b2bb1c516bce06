"""Training-job requests and responses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tunedeck.core.states import JobState


class JobCreate(BaseModel):
    """A new training job; `config` is validated by the same TrainingConfig as the CLI."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=200)
    base_model_id: str = Field(..., min_length=1, max_length=64)
    train_dataset_id: str = Field(..., min_length=1, max_length=64)
    validation_dataset_id: str | None = Field(None, min_length=1, max_length=64)
    config: dict[str, Any] = Field(default_factory=dict, description="Seed 002 keys; unknown keys are refused.")
    priority: int = Field(0, ge=-100, le=100, description="Higher runs first; FIFO within a priority.")


class JobClone(BaseModel):
    """A new job copied from an existing one, with changes; overrides are re-validated as a whole."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=200)
    config: dict[str, Any] = Field(default_factory=dict, description="Keys to change in the copied config.")
    base_model_id: str | None = Field(None, min_length=1, max_length=64)
    train_dataset_id: str | None = Field(None, min_length=1, max_length=64)
    validation_dataset_id: str | None = Field(None, min_length=1, max_length=64)
    priority: int | None = Field(None, ge=-100, le=100)


class JobOut(BaseModel):
    """A training job as stored."""

    id: str
    name: str
    state: JobState
    priority: int
    base_model_id: str
    train_dataset_id: str
    validation_dataset_id: str | None = None
    config: dict[str, Any]
    attempt: int = 0
    error: str | None = None
    cloned_from: str | None = None
    created_at: datetime
    updated_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
