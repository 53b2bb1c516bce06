"""Retention: owners' policies, the operator's bounds, the plan of what a sweep deletes, and deletion dates."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tunedeck.api.schemas.common import RequestBody

DAYS_MAX = 100_000  # inside an SQL integer and any date arithmetic; the operator's bound is usually far lower


class RetentionFields(BaseModel):
    """Days to keep each kind of thing (null: as long as the server allows; forever when it sets no limit)."""

    raw_data_days: int | None = Field(
        None, ge=1, le=DAYS_MAX, description="Delete a dataset version's stored rows this long after its last use."
    )
    checkpoint_days: int | None = Field(
        None, ge=1, le=DAYS_MAX,
        description="Delete a job's checkpoints, except the best and the newest, this long after it finished.",
    )  # fmt: skip
    job_days: int | None = Field(
        None, ge=1, le=DAYS_MAX, description="Delete a whole job this long after it finished (never an active one)."
    )


class RetentionUpdate(RetentionFields, RequestBody):
    """A change to a policy: only the fields sent change; null keeps things as long as the server allows."""

    model_config = ConfigDict(extra="forbid")


class RetentionBoundsOut(BaseModel):
    """The server's bounds on every policy."""

    min_days: int = Field(description="No policy may be shorter.")
    max_days: int | None = Field(
        description="No policy may be longer; what has no policy is deleted after this long too (null: no limit)."
    )


class RetentionPolicyOut(RetentionFields):
    """One policy as set, with the server's bounds."""

    dataset_id: str | None = Field(None, description="The dataset it applies to; null for the user-wide policy.")
    updated_at: datetime | None = None
    bounds: RetentionBoundsOut


class DecidingPolicyOut(BaseModel):
    """The policy that set a deadline: `dataset`, `user` or `operator` (the server's limit), and its days."""

    level: str
    days: int


class RetentionActionOut(BaseModel):
    """One deletion the next sweep does."""

    kind: str = Field(description="purge_raw_data, prune_checkpoints or delete_job.")
    owner_id: str
    target_id: str
    label: str
    due_at: datetime
    policy: DecidingPolicyOut
    prefixes: list[str] = Field(description="Storage folders it removes.")
    checkpoint_steps: list[int] = Field(default_factory=list, description="Checkpoints it removes.")


class RetentionPlanOut(BaseModel):
    """What the next sweeps would delete, as of `now`, each with its due date; nothing is removed by asking."""

    now: datetime
    actions: list[RetentionActionOut]
