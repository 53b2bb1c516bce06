"""Experiments: a hypothesis and a reference config that several jobs vary, as the experiment method runs them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from tunedeck.core.ids import new_id
from tunedeck.jobs.access import Actor, get_owned, scoped
from tunedeck.jobs.db import Database
from tunedeck.jobs.errors import AlreadyExistsError
from tunedeck.jobs.models import Experiment
from tunedeck.jobs.types import utcnow


class ExperimentRepository:
    """Create, read and delete experiments."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self, actor: Actor, *, name: str, hypothesis: str = "", reference_config: dict[str, Any] | None = None
    ) -> Experiment:
        """A new experiment owned by `actor`; AlreadyExistsError when the name is taken."""
        row = Experiment(
            id=new_id("exp_"),
            owner_id=actor.id,
            name=name,
            hypothesis=hypothesis,
            reference_config=reference_config or {},
            created_at=utcnow(),
        )
        try:
            with self.db.write() as session:
                session.add(row)
        except IntegrityError:
            raise AlreadyExistsError(f"experiment {name!r} already exists") from None
        return row

    def get(self, actor: Actor, experiment_id: str) -> Experiment:
        """One experiment; NotFoundError when absent or not `actor`'s."""
        with self.db.read() as session:
            return get_owned(session, Experiment, experiment_id, actor, "experiment")

    def list(self, actor: Actor) -> list[Experiment]:
        """`actor`'s experiments (all for an admin), oldest first."""
        with self.db.read() as session:
            return list(session.scalars(scoped(select(Experiment), Experiment.owner_id, actor).order_by(Experiment.id)))

    def delete(self, actor: Actor, experiment_id: str) -> None:
        """Delete an experiment; its jobs stay, unlinked."""
        with self.db.write() as session:
            session.delete(get_owned(session, Experiment, experiment_id, actor, "experiment"))
