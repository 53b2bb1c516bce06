"""Experiment requests and responses (the experiment method: one hypothesis, one reference, variants compared alike)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from tunedeck.api.schemas.common import RequestBody
from tunedeck.api.schemas.config import ConfigKeys
from tunedeck.eval.guards import COMPACT_GUARD_SCHEMA, GUARD_OBJECT_SCHEMA

# Guards in a request body are kept as sent, so the route names each bad one (`guards[i]`), and are
# documented as the guard forms the parser reads.
CompactGuards = Annotated[list[str], WithJsonSchema({"type": "array", "items": COMPACT_GUARD_SCHEMA})]
Guards = Annotated[
    list[str | dict[str, Any]],
    WithJsonSchema({"type": "array", "items": {"anyOf": [COMPACT_GUARD_SCHEMA, GUARD_OBJECT_SCHEMA]}}),
]


class ExperimentCreate(RequestBody):
    """A new experiment: its hypothesis, the reference config its variants differ from, and its guards."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=200)
    hypothesis: str = Field("", max_length=10_000, description="What should improve, and what must not degrade.")
    reference_config: ConfigKeys = Field(default_factory=dict, description="The job config keys of the reference.")
    guards: CompactGuards = Field(
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
    variant_notes: dict[str, str] = Field(
        default_factory=dict, description="Why a variant changes what it changes, by job id."
    )
    created_at: datetime


class VariantNoteIn(RequestBody):
    """Why one variant changes what it changes (an empty note removes it)."""

    model_config = ConfigDict(extra="forbid")

    note: str = Field(..., max_length=10_000, description="e.g. why two groups of keys change together.")
