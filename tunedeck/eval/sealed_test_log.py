"""The access log of a sealed test set: one record per read, and the warning once it is read again.

Split from `sealed_test` so the API can show the log (and the warning) without
importing the evaluation runner, which needs torch and transformers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


class TestSetReuseWarning(UserWarning):
    """A sealed test set was evaluated again: it is losing its value as a control."""

    __test__ = False  # not a pytest test class despite the name


@dataclass(frozen=True)
class TestSetAccess:
    """One recorded read of a sealed test set."""

    __test__ = False  # not a pytest test class despite the name

    job_id: str | None
    user_id: str | None
    purpose: str
    time: datetime | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "job_id": self.job_id,
            "user_id": self.user_id,
            "purpose": self.purpose,
            "time": self.time.isoformat() if self.time is not None else None,
        }


class TestSetAccessLog(Protocol):
    """Where accesses to one sealed test set are recorded and listed (oldest first)."""

    def record(self, *, job_id: str, purpose: str) -> None:
        """Record that the test set is being read to evaluate `job_id`."""
        ...

    def accesses(self) -> list[TestSetAccess]:
        """Every recorded access, oldest first."""
        ...


def reuse_warning(accesses: Sequence[TestSetAccess]) -> str | None:
    """The warning shown once a test set has been read more than once (None for the first read)."""
    if len(accesses) < 2:
        return None
    jobs = sorted({access.job_id for access in accesses if access.job_id})
    return (
        f"this sealed test set has now been evaluated {len(accesses)} times "
        f"(jobs: {', '.join(jobs) or 'none recorded'}); every further look makes it less of an independent "
        "control. Choose settings on validation data and keep the test set for the final decision."
    )
