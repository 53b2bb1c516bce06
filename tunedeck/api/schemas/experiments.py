"""Experiment requests and responses (the experiment method: one hypothesis, one reference, variants compared alike)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tunedeck.api.schemas.common import RequestBody


class ExperimentCreate(RequestBody):
    """A new experiment: its hypothesis, the reference config its variants differ from, and its guards."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=200)
    hypothesis: str = Field("", max_length=10_000, description="What should improve, and what must not degrade.")
    reference_config: dict[str, Any] = Field(default_factory=dict, description="The job config keys of the reference.")
    guards: list[str] = Field(
        default_factory=list,
        description='What must not degrade, e.g. "json_valid_rate >= baseline" or "per_class.spam.f1 >= 0.8".',
    )


class ExperimentOut(BaseModel):
    """An experiment as stored."""

    id: str
    name: str
    hypothesis: str
    reference_config: dict[str, Any]
    guards: list[str]
    created_at: datetime
