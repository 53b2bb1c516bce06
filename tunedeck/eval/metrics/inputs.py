"""What every metric receives (`MetricInputs`) and the error raised when it is unusable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedeck.core.errors import TunedeckError


class MetricInputError(TunedeckError):
    """A metric was given inputs it cannot score (lengths differ, an unknown label, nothing to score)."""


@dataclass(frozen=True)
class MetricInputs:
    """What one evaluation pass collected, handed unchanged to every metric of its task.

    One shape for every metric is what lets a custom metric plug into the registry
    without the eval runner knowing about it. Fields a task does not use stay empty.

    - `task`: the evaluation task ("classification", "extraction", "generation", or a custom one).
    - `mean_loss`: mean per-token evaluation loss, when the pass computed one.
    - `predictions`: predicted labels (classification) or raw generated texts.
    - `references`: expected labels, reference texts (or lists of acceptable texts),
      or reference objects (extraction), aligned with `predictions`.
    - `labels`: the label set, in the order per-class tables and the confusion matrix use.
    - `required_fields`: top-level keys every extracted object must have.
    - `json_schema`: JSON Schema the extracted objects must satisfy, when given.
    - `extra`: anything else a custom metric needs; built-in metrics ignore it.
    """

    task: str
    mean_loss: float | None = None
    predictions: Sequence[Any] = ()
    references: Sequence[Any] = ()
    labels: Sequence[str] = ()
    required_fields: Sequence[str] = ()
    json_schema: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def check_aligned(predictions: Sequence[Any], references: Sequence[Any], what: str) -> None:
    """Refuse empty or misaligned prediction/reference lists, naming the metric family in `what`."""
    if len(predictions) != len(references):
        raise MetricInputError(
            f"{what}: {len(predictions)} predictions but {len(references)} references; "
            "they must be aligned one to one"
        )
    if not predictions:
        raise MetricInputError(f"{what}: no examples to score")
