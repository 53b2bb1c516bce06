"""Quotas: the limits that apply to a user, what they use, and the operator's settings."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tunedeck.api.schemas.common import SQL_INT_MAX, RequestBody

# Bounds that keep every value inside its column on both databases and inside reason.
JOB_COUNT_MAX = 1_000_000
DEVICE_HOURS_MAX = 10_000_000.0
PERIOD_DAYS_MAX = 3650


class QuotaFields(BaseModel):
    """Limits as set on one row (null: not set here)."""

    running_jobs: int | None = Field(None, ge=0, le=JOB_COUNT_MAX, description="Jobs running at once.")
    queued_jobs: int | None = Field(None, ge=0, le=JOB_COUNT_MAX, description="Jobs waiting in the queue at once.")
    storage_bytes: int | None = Field(
        None, ge=0, le=SQL_INT_MAX, description="Bytes kept in storage: datasets, checkpoints, models, exports."
    )
    device_hours: float | None = Field(
        None, ge=0, le=DEVICE_HOURS_MAX, description="Device-hours per period; a job on CPU counts as one device."
    )
    period_days: int | None = Field(
        None, ge=1, le=PERIOD_DAYS_MAX, description="The rolling period of device_hours, in days (default 30)."
    )


class QuotaUpdate(QuotaFields, RequestBody):
    """An admin's change to a quota row: only the fields sent change; null clears one (it inherits again)."""

    model_config = ConfigDict(extra="forbid")


class QuotaSettingsOut(QuotaFields):
    """One quota row: everyone's (`subject` = `*`) or one user's, with who set it last."""

    subject: str
    updated_by: str | None = None
    updated_at: datetime | None = None


class QuotaLimitsOut(BaseModel):
    """The limits that apply (null: no limit)."""

    running_jobs: int | None
    queued_jobs: int | None
    storage_bytes: int | None
    device_hours: float | None
    period_days: int


class QuotaUseOut(BaseModel):
    """What the user uses now."""

    running_jobs: int
    queued_jobs: int
    storage_bytes: int
    device_hours: float


class QuotaOut(BaseModel):
    """A user's quota: the limits that apply, their use, and what is set for them alone."""

    user: str
    limits: QuotaLimitsOut
    use: QuotaUseOut
    own: QuotaSettingsOut
