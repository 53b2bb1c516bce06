"""Rental plans: create, list, read (with the timeline and, once started, the tracking) and start the rental."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, status

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.plans import PlanCreate, PlanOut
from tunedeck.service.plans.plan_sources import create_plan, plan_out
from tunedeck.store.types import utcnow

router = APIRouter(prefix="/plans", tags=["plans"])
_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}}


@router.post("", response_model=PlanOut, status_code=status.HTTP_201_CREATED, responses=_404)
def create(body: PlanCreate, user: CurrentUser, context: Context) -> PlanOut:
    """Plan a rental for one of the caller's experiments; 422 names what is missing to plan it."""
    row = create_plan(context.jobs, context.artifacts, user, body)
    return plan_out(context.jobs, user, row, utcnow())


@router.get("", response_model=list[PlanOut])
def list_plans(
    user: CurrentUser,
    context: Context,
    experiment_id: str | None = Query(None, max_length=40, description="Only this experiment's plans."),
) -> list[PlanOut]:
    """The caller's plans, newest first."""
    now = utcnow()
    return [
        plan_out(context.jobs, user, row, now) for row in context.jobs.plans.list(user, experiment_id=experiment_id)
    ]


@router.get("/{plan_id}", response_model=PlanOut, responses=_404)
def get_plan(plan_id: str, user: CurrentUser, context: Context) -> PlanOut:
    """One plan with its timeline and the tracking of its rental; 404 when it is not the caller's."""
    return plan_out(context.jobs, user, context.jobs.plans.get(user, plan_id), utcnow())


@router.post(
    "/{plan_id}/start",
    response_model=PlanOut,
    responses={**_404, 409: {"model": ErrorOut, "description": "The rental has started already."}},
)
def start_plan(plan_id: str, user: CurrentUser, context: Context) -> PlanOut:
    """The rental starts now: from here the plan tracks the experiment's jobs against it."""
    now = utcnow()
    return plan_out(context.jobs, user, context.jobs.plans.start(user, plan_id, now=now), now)
