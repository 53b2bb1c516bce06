"""Preflight requests: the same references and config as a job, checked before it is queued."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tunedeck.api.schemas.common import RequestBody


class PreflightIn(RequestBody):
    """What the job form would submit, minus its name."""

    model_config = ConfigDict(extra="forbid")

    base_model_id: str = Field(..., min_length=1, max_length=40)
    train_dataset_id: str = Field(..., min_length=1, max_length=40)
    validation_dataset_id: str | None = Field(None, min_length=1, max_length=40)
    config: dict[str, Any] = Field(default_factory=dict, description="The job config keys, validated as for a job.")


class PreflightOut(BaseModel):
    """The eight checks, each pass, warn, fail or skip with its figures, and the memory-fit decision."""

    status: str
    ok: bool
    report: dict[str, Any]
