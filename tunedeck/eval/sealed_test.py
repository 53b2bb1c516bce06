"""The sealed test set: evaluated only on explicit request, for one chosen job, every access logged.

Seed 000: keep the final test data for the final decision; using it to choose every
setting wears away its value as a control. So the test set is never part of a
training job. `evaluate_sealed_test` is the one entry point that reads it; it needs
the id of the job being judged and an access log, records the access *before*
evaluating (the data is read even if the evaluation then fails), and from the second
access on returns a warning and raises a `TestSetReuseWarning` through `warnings`.

The log is a protocol so this layer never touches the database: the CLI and the
API adapt the job store's `record_test_set_access` / `list_test_set_accesses`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.eval.procedure import EvaluationProcedure
from tunedeck.eval.result import EvaluationResult
from tunedeck.eval.runner import run_procedure

SEALED_TEST_PURPOSE = "final evaluation"


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


@dataclass(frozen=True)
class SealedTestOutcome:
    """The test evaluation, the access log after it, and the reuse warning when there is one."""

    result: EvaluationResult
    accesses: list[TestSetAccess]
    warning: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the evaluation plus its access history."""
        return {
            **self.result.to_dict(),
            "sealed_test": {
                "access_count": len(self.accesses),
                "accesses": [access.to_dict() for access in self.accesses],
                "warning": self.warning,
            },
        }


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


def evaluate_sealed_test(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    procedure: EvaluationProcedure,
    *,
    job_id: str,
    access_log: TestSetAccessLog,
    purpose: str = SEALED_TEST_PURPOSE,
) -> SealedTestOutcome:
    """Evaluate the trained model of `job_id` on the sealed test rows; log the access first.

    Returns the result with the whole access history; from the second access on,
    `warning` says the test set is losing its value and a `TestSetReuseWarning` is issued.
    """
    if not job_id:
        raise ConfigError(
            [
                Issue(
                    "a sealed test set is only evaluated for a chosen job",
                    field="job_id",
                    expected="the id of the job whose final model is being judged",
                )
            ],
            title="sealed test set",
        )
    access_log.record(job_id=job_id, purpose=purpose)
    accesses = access_log.accesses()
    warning = reuse_warning(accesses)
    if warning is not None:
        warnings.warn(warning, TestSetReuseWarning, stacklevel=2)
    result = run_procedure(model, tokenizer, rows, procedure)
    return SealedTestOutcome(result, accesses, warning)
