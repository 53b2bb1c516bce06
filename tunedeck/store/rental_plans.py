"""Rental plans: create, read, list and start them, owner-scoped like every other object."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

from tunedeck.core.errors import StateTransitionError
from tunedeck.core.ids import new_id
from tunedeck.store.access import Actor, get_owned, scoped
from tunedeck.store.db import Database
from tunedeck.store.models import Experiment, RentalPlan
from tunedeck.store.types import utcnow


class RentalPlanRepository:
    """Create, read, list and start rental plans."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self,
        actor: Actor,
        *,
        experiment_id: str,
        name: str,
        machine: dict[str, Any],
        workload: dict[str, Any],
        figures: dict[str, Any],
        margin_share: float,
        price_per_hour: float | None = None,
        rental_days: int | None = None,
    ) -> RentalPlan:
        """A new plan of `actor` for one of their experiments; NotFoundError when the experiment is not theirs."""
        with self.db.write() as session:
            experiment = get_owned(session, Experiment, experiment_id, actor, "experiment")
            row = RentalPlan(
                id=new_id("plan_"),
                owner_id=experiment.owner_id,
                experiment_id=experiment.id,
                name=name,
                machine=machine,
                workload=workload,
                figures=figures,
                margin_share=margin_share,
                price_per_hour=price_per_hour,
                rental_days=rental_days,
                created_at=utcnow(),
            )
            session.add(row)
        return row

    def get(self, actor: Actor, plan_id: str) -> RentalPlan:
        """One plan; NotFoundError when absent or not `actor`'s."""
        with self.db.read() as session:
            return get_owned(session, RentalPlan, plan_id, actor, "plan")

    def list(self, actor: Actor, *, experiment_id: str | None = None) -> list[RentalPlan]:
        """`actor`'s plans (all for an admin), newest first, optionally one experiment's."""
        statement = scoped(select(RentalPlan), RentalPlan.owner_id, actor)
        if experiment_id is not None:
            statement = statement.where(RentalPlan.experiment_id == experiment_id)
        with self.db.read() as session:
            return list(session.scalars(statement.order_by(RentalPlan.id.desc())))

    def start(self, actor: Actor, plan_id: str, *, now: datetime | None = None) -> RentalPlan:
        """Record that the rental started at `now`; StateTransitionError when it has started already."""
        with self.db.write() as session:
            row = get_owned(session, RentalPlan, plan_id, actor, "plan", for_update=True)
            if row.started_at is not None:
                raise StateTransitionError(
                    f"plan {plan_id!r}: the rental started at {row.started_at.isoformat()} already"
                )
            row.started_at = now or utcnow()
            return row
