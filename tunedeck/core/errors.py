"""Errors that cross layer boundaries.

Every user-facing error names where the problem is (file, line, field) and what
was expected, so a person can fix the input without reading a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class TunedeckError(Exception):
    """Base class of every error tunedeck raises on purpose."""


@dataclass(frozen=True)
class Issue:
    """One problem found in an input: where it is, what was expected, what was found."""

    message: str
    field: str | None = None
    file: str | None = None
    line: int | None = None
    expected: str | None = None
    found: str | None = None
    unit: str | None = None
    """What `line` counts when it is not a line of the file: "row" for the N-th row of a JSON array."""

    def render(self) -> str:
        """One human-readable line: `file:line: field: message (expected X, found Y)`, or `file:row N: ...`."""
        where = []
        position = None if self.line is None else f"{self.unit} {self.line}" if self.unit else str(self.line)
        if self.file:
            where.append(self.file if position is None else f"{self.file}:{position}")
        elif position is not None:
            where.append(position if self.unit else f"line {position}")
        if self.field:
            where.append(self.field)
        text = ": ".join([*where, self.message]) if where else self.message
        details = []
        if self.expected is not None:
            details.append(f"expected {self.expected}")
        if self.found is not None:
            details.append(f"found {self.found}")
        return f"{text} ({', '.join(details)})" if details else text

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form, without empty keys."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class IssueListError(TunedeckError):
    """An error made of one or more located issues."""

    issues: list[Issue] = field(default_factory=list)
    title: str = "invalid input"

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        lines = [f"{self.title}:"] + [f"  - {issue.render()}" for issue in self.issues]
        return "\n".join(lines)


class ConfigError(IssueListError):
    """The training config is invalid or self-contradictory."""

    def __init__(self, issues: list[Issue], title: str = "invalid training config") -> None:
        super().__init__(issues=issues, title=title)


class DataError(IssueListError):
    """A dataset file is unreadable or has invalid rows."""

    def __init__(self, issues: list[Issue], title: str = "invalid dataset") -> None:
        super().__init__(issues=issues, title=title)


class MissingReferenceError(IssueListError):
    """A well-formed request names something that is not there (a folder on the server); the issue says where."""

    def __init__(self, issues: list[Issue], title: str = "not found") -> None:
        super().__init__(issues=issues, title=title)


class ModelLoadError(TunedeckError):
    """A base model could not be resolved or loaded."""


class HubDatasetError(TunedeckError):
    """A hub dataset could not be resolved, or its split could not be read."""


class HardwareError(TunedeckError):
    """The requested option is not supported by the hardware or software stack."""


class StateTransitionError(TunedeckError):
    """A job was asked to move between states that are not connected."""


class ForbiddenError(TunedeckError):
    """The caller may not do this: the operator has not allowed it (the message says who can, and how)."""


class NotFoundError(TunedeckError):
    """An object does not exist or belongs to someone else."""


class StorageError(TunedeckError):
    """An artifact could not be stored, read or verified."""
