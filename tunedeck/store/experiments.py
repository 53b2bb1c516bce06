"""Experiments: a hypothesis and a reference config that several jobs vary, as the experiment method runs them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from tunedeck.core.errors import NotFoundError
from tunedeck.core.ids import new_id
from tunedeck.store.access import Actor, get_owned, scoped
from tunedeck.store.db import Database
from tunedeck.store.errors import AlreadyExistsError
from tunedeck.store.models import Experiment, Job
from tunedeck.store.types import utcnow


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

    def set_variant_note(self, actor: Actor, experiment_id: str, job_id: str, note: str, *, key: str) -> Experiment:
        """Record why job `job_id` of the experiment changes what it changes (an empty note removes it).

        The notes live beside the reference config under `key`, by job id. NotFoundError
        when the experiment is not `actor`'s or the job is not one of its variants.
        """
        with self.db.write() as session:
            row = get_owned(session, Experiment, experiment_id, actor, "experiment")
            job = session.get(Job, job_id)
            if job is None or job.experiment_id != row.id or job.owner_id != row.owner_id:
                raise NotFoundError(f"job {job_id!r} is not a variant of experiment {experiment_id!r}")
            stored = dict(row.reference_config or {})
            notes = {**(stored.get(key) or {}), job_id: note.strip()}
            stored[key] = {job: text for job, text in notes.items() if text}
            row.reference_config = stored  # a new dict, so the JSON column is written
            return row

    def delete(self, actor: Actor, experiment_id: str) -> None:
        """Delete an experiment; its jobs stay, unlinked."""
        with self.db.write() as session:
            session.delete(get_owned(session, Experiment, experiment_id, actor, "experiment"))
