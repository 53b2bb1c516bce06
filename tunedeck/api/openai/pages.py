"""Cursor pages as the client reads them: `after` is the id of the previous page's last item, `has_more` says
whether another page follows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypeVar

Order = Literal["asc", "desc"]


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_HasId)


def page_after(items: Sequence[T], after: str | None, limit: int, order: Order = "desc") -> tuple[list[T], bool]:
    """The page of `items` (given oldest first) that follows the item `after` in `order`, and whether more follow.

    An `after` that names no item starts from the beginning, as a page of a list that lost
    that item (deleted meanwhile) still has to go on somewhere.
    """
    ordered = list(items) if order == "asc" else list(reversed(items))
    start = 0
    if after is not None:
        ids = [item.id for item in ordered]
        if after in ids:
            start = ids.index(after) + 1
    page = ordered[start : start + limit]
    return page, start + limit < len(ordered)
