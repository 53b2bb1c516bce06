"""`Diagnosis`: what went wrong or looks wrong in a run, what to do about it, and the figures that show it.

A diagnosis becomes one `diagnosis` event (`kind`, `message`, `advice`, `figures`). It lives in the
core layer so that both the engine (failures, training-speed checks) and the pure quality checks on
a run's metric traces (`tunedeck.eval.quality_diagnosis`) build the same record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tunedeck.core.events import EventType, EventWriter


@dataclass(frozen=True)
class Diagnosis:
    """What went wrong, what to do about it, and the figures that show it."""

    # Failures: nan_loss | oom | interrupted | error | no_update.
    # Warnings on a run that still succeeds: slow | loss_rising | loss_plateau | overfitting | guard_regression.
    kind: str
    message: str
    advice: list[str]
    figures: dict[str, Any] = field(default_factory=dict)

    def to_event_fields(self) -> dict[str, Any]:
        """The fields of the `diagnosis` event (the writer adds type and time)."""
        return {"kind": self.kind, "message": self.message, "advice": list(self.advice), "figures": self.figures}

    def emit(self, events: EventWriter) -> dict[str, Any]:
        """Write the diagnosis event."""
        return events.emit(EventType.DIAGNOSIS, **self.to_event_fields())


def rounded_rate(value: float) -> float:
    """A learning rate rounded to one significant digit (what advice suggests trying: 1e-05, not 1.04e-05)."""
    exponent = math.floor(math.log10(value))
    return float(round(value / 10**exponent) * 10**exponent)
