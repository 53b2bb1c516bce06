"""Shapes shared by every resource: error bodies, located issues, pages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tunedeck.core.errors import Issue
from tunedeck.core.json_numbers import whole_numbers_as_ints

T = TypeVar("T")

# The largest integer the API takes for a step, version, event id or byte count: inside the database's
# 64-bit columns, and exact in every JSON parser (2**53 - 1, as I-JSON asks). With 2**63 - 1, a client
# that reads numbers as doubles rounds values just above the bound onto it and takes them as valid.
SQL_INT_MAX = 2**53 - 1
# Random generators (numpy's among them) take seeds below 2**32.
SEED_MAX = 2**32 - 1
# No stored text may hold NUL: PostgreSQL and file paths refuse it.
NUL = "\x00"


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


def nul_path(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (or key) in `value` holding NUL; None when there is none."""
    if isinstance(value, str):
        return (path or "body") if NUL in value else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and NUL in key:
                return here
            if (found := nul_path(item, here)) is not None:
                return found
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for index, item in enumerate(value):
            if (found := nul_path(item, f"{path}[{index}]")) is not None:
                return found
    return None


def refuse_nul(value: Any) -> Any:
    """`value` as it is; ValueError naming the first string (or key) in it that holds NUL."""
    found = nul_path(value)
    if found is not None:
        raise ValueError(f"{found}: text must not hold the NUL character (\\u0000)")
    return value


class RequestBody(BaseModel):
    """Base of every JSON request body: no string anywhere in it may hold NUL, and every value has its JSON type.

    Strict, as the OpenAPI document reads a body: `0` is not `false` and `"5"` is not `5` (422,
    not a quiet conversion), while `3.0` is the integer 3.
    """

    model_config = ConfigDict(strict=True)

    @model_validator(mode="before")
    @classmethod
    def _read_as_json(cls, data: Any) -> Any:
        return whole_numbers_as_ints(refuse_nul(data))
