"""Owner scoping: every object belongs to a user; another user gets NotFound, admins see all but datasets.

Repositories call these helpers instead of filtering by hand, so no query can
forget the owner check.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import Session

from tunedeck.core.errors import NotFoundError

T = TypeVar("T")


class Actor(Protocol):
    """Whoever makes a request: a `User` row or anything with the same two fields."""

    @property
    def id(self) -> str:
        """The user's id."""
        ...

    @property
    def role(self) -> str:
        """`admin` or `user`."""
        ...


def is_admin(actor: Actor) -> bool:
    """Whether `actor` sees every user's objects."""
    return actor.role == "admin"


# Operators manage accounts, quotas and the queue; they do not read users' datasets through the product.
OWNER_ONLY_TABLES = frozenset({"datasets", "dataset_versions"})


def admin_reads(model: type[Any]) -> bool:
    """Whether an admin sees other users' rows of `model` (never their datasets)."""
    return getattr(model, "__tablename__", "") not in OWNER_ONLY_TABLES


def scoped(statement: Select[Any], owner_column: Any, actor: Actor) -> Select[Any]:
    """`statement` restricted to rows `actor` owns (unchanged for an admin, except on datasets)."""
    if is_admin(actor) and admin_reads(owner_column.class_):
        return statement
    return statement.where(owner_column == actor.id)


def get_owned(
    session: Session, model: type[T], object_id: str, actor: Actor, what: str, *, for_update: bool = False
) -> T:
    """The row `object_id` of `model` if `actor` may see it, else NotFoundError (never a hint it exists)."""
    row = session.get(model, object_id, with_for_update=for_update)
    if row is None or not ((is_admin(actor) and admin_reads(model)) or getattr(row, "owner_id", None) == actor.id):
        raise NotFoundError(f"{what} {object_id!r} not found")
    return row
