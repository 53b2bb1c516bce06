"""`EvaluationResult`: the metrics, per-example outputs and procedure of one evaluation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tunedeck.eval.procedure import EvaluationProcedure

RESULT_FORMAT = "tunedeck.evaluation/1"
# Where a run directory keeps its two evaluations (the worker uploads them beside results.json).
BASELINE_EVAL_FILE = "baseline_eval.json"
FINAL_EVAL_FILE = "final_eval.json"


@dataclass
class EvaluationResult:
    """What one evaluation measured and how.

    `examples` keeps one record per evaluated row (reference, prediction, per-example
    loss, truncation flags) so a later reader can see *which* examples improved, not
    only the averages. `truncation` counts rows cut by `max_length`.
    """

    procedure: EvaluationProcedure
    metrics: dict[str, Any]
    examples: list[dict[str, Any]]
    truncation: dict[str, Any] = field(default_factory=dict)

    @property
    def procedure_sha256(self) -> str:
        """Hash of the procedure: equal for evaluations that can be compared."""
        return self.procedure.sha256

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as written to `baseline_eval.json` and `final_eval.json`."""
        return {
            "format": RESULT_FORMAT,
            "procedure": self.procedure.to_dict(),
            "procedure_sha256": self.procedure_sha256,
            "metrics": self.metrics,
            "truncation": self.truncation,
            "examples": self.examples,
        }
