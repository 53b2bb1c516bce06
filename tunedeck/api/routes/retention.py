"""Retention: each owner sets how long their things are kept, within the server's bounds, and sees the plan.

`GET/PUT /retention` is the caller's user-wide policy, `GET/PUT /datasets/{id}/retention`
one dataset's; `GET /retention/plan` is what the next sweep would delete (a dry run).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta

from fastapi import APIRouter, HTTPException, Query, status

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.retention import (
    DAYS_MAX,
    DecidingPolicyOut,
    RetentionActionOut,
    RetentionBoundsOut,
    RetentionPlanOut,
    RetentionPolicyOut,
    RetentionUpdate,
)
from tunedeck.service.privacy.retention_dates import retention_bounds
from tunedeck.service.privacy.retention_plan import RetentionAction, plan_retention
from tunedeck.store.retention import PolicyValues
from tunedeck.store.types import utcnow

router = APIRouter(tags=["retention"])
_ERRORS: dict[int | str, dict[str, object]] = {404: {"model": ErrorOut}, 422: {"model": ErrorOut}}


def _policy_out(context: ApiContext, values: PolicyValues, dataset_id: str | None) -> RetentionPolicyOut:
    bounds = retention_bounds(context)
    return RetentionPolicyOut(
        raw_data_days=values.raw_data_days,
        checkpoint_days=values.checkpoint_days,
        job_days=values.job_days,
        updated_at=values.updated_at,
        dataset_id=dataset_id,
        bounds=RetentionBoundsOut(min_days=bounds.min_days, max_days=bounds.max_days),
    )


def action_out(action: RetentionAction) -> RetentionActionOut:
    """The wire form of a planned deletion."""
    return RetentionActionOut(
        kind=action.kind,
        owner_id=action.owner_id,
        target_id=action.target_id,
        label=action.label,
        due_at=action.due_at,
        policy=DecidingPolicyOut(**asdict(action.policy)),
        prefixes=list(action.prefixes),
        checkpoint_steps=list(action.checkpoint_steps),
    )


@router.get("/retention", response_model=RetentionPolicyOut)
def my_retention(user: CurrentUser, context: Context) -> RetentionPolicyOut:
    """The caller's user-wide retention policy and the server's bounds."""
    return _policy_out(context, context.jobs.retention.user_policy(user), None)


@router.put("/retention", response_model=RetentionPolicyOut, responses=_ERRORS)
def set_my_retention(body: RetentionUpdate, user: CurrentUser, context: Context) -> RetentionPolicyOut:
    """Set the caller's user-wide policy; a value outside the server's bounds is a 422 naming it."""
    changes = body.model_dump(include=body.model_fields_set)
    values = context.jobs.retention.set_user_policy(user, changes, retention_bounds(context))
    return _policy_out(context, values, None)


@router.get("/datasets/{dataset_id}/retention", response_model=RetentionPolicyOut, responses=_ERRORS)
def dataset_retention(dataset_id: str, user: CurrentUser, context: Context) -> RetentionPolicyOut:
    """One of the caller's datasets' policy (its versions, and the jobs trained on it)."""
    return _policy_out(context, context.jobs.retention.dataset_policy(user, dataset_id), dataset_id)


@router.put("/datasets/{dataset_id}/retention", response_model=RetentionPolicyOut, responses=_ERRORS)
def set_dataset_retention(
    dataset_id: str, body: RetentionUpdate, user: CurrentUser, context: Context
) -> RetentionPolicyOut:
    """Set one dataset's policy; where it and the user-wide one both set a value, the smaller wins."""
    changes = body.model_dump(include=body.model_fields_set)
    values = context.jobs.retention.set_dataset_policy(user, dataset_id, changes, retention_bounds(context))
    return _policy_out(context, values, dataset_id)


@router.get("/retention/plan", response_model=RetentionPlanOut, responses={403: {"model": ErrorOut}})
def retention_plan(
    user: CurrentUser,
    context: Context,
    all: bool = Query(False, description="Every user's deletions (admins only)."),
    within_days: int = Query(
        0, ge=0, le=DAYS_MAX, description="Also list what becomes due within this many days (0: only what is due now)."
    ),
) -> RetentionPlanOut:
    """What the next retention sweeps would delete of the caller's things, each with its due date; removes nothing."""
    if all and not user.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "only an admin sees every user's retention plan")
    now = utcnow()
    horizon = now + timedelta(days=within_days)
    owner_id = None if all else user.id
    actions = plan_retention(context.jobs, now=horizon, bounds=retention_bounds(context), owner_id=owner_id)
    return RetentionPlanOut(now=now, actions=[action_out(action) for action in actions])
