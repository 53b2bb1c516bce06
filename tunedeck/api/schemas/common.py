"""Shapes shared by every resource: error bodies, located issues, pages."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, Field

from tunedeck.core.errors import Issue

T = TypeVar("T")


class IssueOut(BaseModel):
    """One located problem in an input: file, line, field, what was expected, what was found."""

    message: str
    field: str | None = None
    file: str | None = None
    line: int | None = None
    expected: str | None = None
    found: str | None = None

    @classmethod
    def from_issue(cls, issue: Issue) -> IssueOut:
        """The wire form of a core Issue."""
        return cls(**issue.to_dict())  # type: ignore[arg-type]


class ErrorOut(BaseModel):
    """Body of every error response."""

    detail: str
    issues: list[IssueOut] = Field(default_factory=list)


class Page(BaseModel, Generic[T]):
    """A page of a listing; pass `next_cursor` back as `cursor` for the next one (null: no more)."""

    items: list[T]
    next_cursor: str | None = None
