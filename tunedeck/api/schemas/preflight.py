"""Preflight requests: the same references and config as a job, checked before it is queued."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from tunedeck.api.schemas.common import RequestBody
from tunedeck.api.schemas.config import ConfigKeys


class PreflightIn(RequestBody):
    """What the job form would submit, minus its name."""

    model_config = ConfigDict(extra="forbid")

    base_model_id: str = Field(..., min_length=1, max_length=40)
    train_dataset_id: str = Field(..., min_length=1, max_length=40)
    validation_dataset_id: str | None = Field(None, min_length=1, max_length=40)
    config: ConfigKeys = Field(default_factory=dict, description="The job config keys, validated as for a job.")
    devices_needed: int = Field(
        0, ge=0, le=64, description="Accelerators the job would train on: the checks run on as many (0: CPU)."
    )
