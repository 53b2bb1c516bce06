"""Rental plan requests and responses: a machine rented for 3, 7 or 30 days, planned around an experiment's phases."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.config import JsonDict

from tunedeck.api.schemas.common import SQL_INT_MAX, RequestBody
from tunedeck.planning.figures import DEFAULT_EFFICIENCY
from tunedeck.planning.peak_flops import DEVICE_TYPES
from tunedeck.planning.timeline import DEFAULT_MARGIN_SHARE

RentalDays = Literal[3, 7, 30]
# What `_one_way` checks, as the OpenAPI document states it: a device type (and count), or a worker.
_ONE_WAY: JsonDict = {
    "oneOf": [
        {"required": ["device_type"], "properties": {"device_type": {"type": "string"}, "worker_id": {"type": "null"}}},
        {"required": ["worker_id"], "properties": {"worker_id": {"type": "string"}, "device_type": {"type": "null"}}},
    ]
}
# Bounds that keep every duration finite: a plan of more parameters, rows or tokens than these is not a rental.
MAX_PARAMS = 1e15
MAX_TOKENS_PER_ROW = 1_048_576


class MachineIn(RequestBody):
    """What is rented: a device type and count, or a worker whose checks before training reported its hardware."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_ONE_WAY)

    device_type: str | None = Field(
        None,
        description="A device type of the peak FLOPs table (for estimates).",
        json_schema_extra={"enum": [*DEVICE_TYPES, None]},
    )
    device_count: int = Field(1, ge=1, le=1024)
    worker_id: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="This worker: the hardware its newest checks before training reported.",
    )

    @model_validator(mode="after")
    def _one_way(self) -> MachineIn:
        if (self.device_type is None) == (self.worker_id is None):
            raise ValueError("give either device_type (with device_count) or worker_id, not both or neither")
        return self

    @field_validator("device_type")
    @classmethod
    def _known_device(cls, value: str | None) -> str | None:
        if value is not None and value not in DEVICE_TYPES:
            raise ValueError(f"{value!r} is not one of {', '.join(DEVICE_TYPES)}")
        return value


class VariantIn(RequestBody):
    """One variant to try: its name (a job of the experiment with this name is its run), epochs and rows."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(..., min_length=1, max_length=200)
    epochs: int | None = Field(None, ge=1, le=1000, description="Default: the reference config's epochs.")
    train_rows: int | None = Field(None, ge=1, le=SQL_INT_MAX, description="Default: the plan's training rows.")


class PlanCreate(RequestBody):
    """A new rental plan for one experiment."""

    model_config = ConfigDict(extra="forbid", strict=True)

    experiment_id: str = Field(..., min_length=1, max_length=40)
    name: str | None = Field(None, min_length=1, max_length=200, description="Default: the experiment's name.")
    machine: MachineIn
    price_per_hour: float | None = Field(None, ge=0, le=1e6, description="The machine's hourly price, for the costs.")
    rental_days: RentalDays | None = Field(
        None, description="The rental tracked against; default: the shortest that holds the plan."
    )
    margin_share: float = Field(DEFAULT_MARGIN_SHARE, ge=0, le=2, description="Margin kept on top of the plan.")
    variants: list[VariantIn] = Field(
        default_factory=list, max_length=200, description="In the order they will run; default: the experiment's jobs."
    )
    train_dataset_id: str | None = Field(None, max_length=40, description="Its newest version's rows are trained.")
    validation_dataset_id: str | None = Field(None, max_length=40)
    test_dataset_id: str | None = Field(None, max_length=40, description="The sealed test set (only its row count).")
    train_rows: int | None = Field(None, ge=1, le=SQL_INT_MAX)
    validation_rows: int | None = Field(None, ge=0, le=SQL_INT_MAX)
    test_rows: int | None = Field(None, ge=0, le=SQL_INT_MAX)
    model_params: float | None = Field(
        None, ge=1, le=MAX_PARAMS, description="Base model parameters, for estimates (e.g. 7e9)."
    )
    tokens_per_row: int | None = Field(
        None, ge=1, le=MAX_TOKENS_PER_ROW, description="Default: the reference config's max_length."
    )
    efficiency: float = Field(DEFAULT_EFFICIENCY, ge=0.01, le=1, description="Share of peak FLOPs for estimates.")
    preflight_id: str | None = Field(
        None, max_length=40, description="A finished preflight work item measured on this machine."
    )


class PlanOut(BaseModel):
    """A plan as stored, with its timeline and, once the rental started, the tracking."""

    id: str
    name: str
    experiment_id: str
    machine: dict[str, Any]
    price_per_hour: float | None
    margin_share: float
    rental_days: int | None
    created_at: datetime
    started_at: datetime | None
    workload: dict[str, Any]
    figures: dict[str, Any]
    timeline: dict[str, Any]
    tracking: dict[str, Any] | None = None
