"""Base models registered by users: a hub id and revision, or a local path, pinned once resolved."""

from __future__ import annotations

from sqlalchemy import select

from tunedeck.core.errors import ForbiddenError, Issue, IssueListError
from tunedeck.core.ids import new_id
from tunedeck.store.access import Actor, get_owned, is_admin, scoped
from tunedeck.store.db import Database
from tunedeck.store.models import BaseModelRecord
from tunedeck.store.types import utcnow


class BaseModelRepository:
    """Register, read, pin and delete base models."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def register(
        self,
        actor: Actor,
        *,
        name: str,
        hub_id: str | None = None,
        local_path: str | None = None,
        revision: str | None = None,
    ) -> BaseModelRecord:
        """Register a base model from exactly one of `hub_id` or `local_path`."""
        if (hub_id is None) == (local_path is None):
            raise IssueListError(
                [Issue("give exactly one of hub_id or local_path", field="hub_id", expected="one source")],
                title="invalid base model",
            )
        row = BaseModelRecord(
            id=new_id("bm_"),
            owner_id=actor.id,
            name=name,
            hub_id=hub_id,
            local_path=local_path,
            revision=revision,
            created_at=utcnow(),
        )
        with self.db.write() as session:
            session.add(row)
        return row

    def pin(self, actor: Actor, base_model_id: str, resolved: str) -> BaseModelRecord:
        """Record the resolved commit (hub) or content fingerprint (local path) the model was loaded at."""
        with self.db.write() as session:
            row = get_owned(session, BaseModelRecord, base_model_id, actor, "base model", for_update=True)
            row.resolved = resolved
        return row

    def set_remote_code(self, admin: Actor, base_model_id: str, *, allowed: bool) -> BaseModelRecord:
        """Allow (or withdraw) running the model's own code for jobs that ask for trust_remote_code; admins only.

        Who allowed it and when are kept on the row.
        """
        if not is_admin(admin):
            raise ForbiddenError("only an admin can allow a base model's code to run")
        with self.db.write() as session:
            row = get_owned(session, BaseModelRecord, base_model_id, admin, "base model", for_update=True)
            row.remote_code_allowed_by = admin.id if allowed else None
            row.remote_code_allowed_at = utcnow() if allowed else None
        return row

    def get(self, actor: Actor, base_model_id: str) -> BaseModelRecord:
        """One base model; NotFoundError when absent or not `actor`'s."""
        with self.db.read() as session:
            return get_owned(session, BaseModelRecord, base_model_id, actor, "base model")

    def list(self, actor: Actor) -> list[BaseModelRecord]:
        """`actor`'s base models (all for an admin), oldest first."""
        with self.db.read() as session:
            statement = scoped(select(BaseModelRecord), BaseModelRecord.owner_id, actor)
            return list(session.scalars(statement.order_by(BaseModelRecord.id)))

    def delete(self, actor: Actor, base_model_id: str) -> None:
        """Delete a base model registration (jobs keep their config; their link becomes empty)."""
        with self.db.write() as session:
            session.delete(get_owned(session, BaseModelRecord, base_model_id, actor, "base model"))


def refuse_unallowed_remote_code(trust_remote_code: bool, base: BaseModelRecord) -> None:
    """Raise ForbiddenError when a job asks for `trust_remote_code` and no admin allowed `base`'s code.

    The one rule for every path that would load the model: job creation, clones, preflight,
    and the worker when it claims the job (an allowance can be withdrawn meanwhile).
    """
    if not trust_remote_code or base.remote_code_allowed_at is not None:
        return
    raise ForbiddenError(
        f'trust_remote_code: the code of base model "{base.name}" ({base.id}) is not allowed to run on this '
        f"server. An admin can allow it: PUT /api/v1/base-models/{base.id}/remote-code "
        f'{{"allowed": true}}, or on the server `tunedeck models allow-code {base.id} --by <admin name>`.'
    )
