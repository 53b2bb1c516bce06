"""The sealed test set: evaluated only on explicit request, for one chosen job, every access logged.

The experiment method: keep the final test data for the final decision; using it to choose every
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
from typing import Any

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.eval.procedure import EvaluationProcedure
from tunedeck.eval.result import EvaluationResult
from tunedeck.eval.runner import run_procedure
from tunedeck.eval.sealed_test_log import TestSetAccess, TestSetAccessLog, TestSetReuseWarning, reuse_warning

__all__ = [
    "SEALED_TEST_PURPOSE",
    "SealedTestOutcome",
    "TestSetAccess",
    "TestSetAccessLog",
    "TestSetReuseWarning",
    "evaluate_sealed_test",
    "reuse_warning",
]

SEALED_TEST_PURPOSE = "final evaluation"


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
