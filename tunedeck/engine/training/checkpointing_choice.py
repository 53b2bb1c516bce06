"""`gradient_checkpointing: "auto"`: recompute activations only when the step does not fit in memory without them.

Recomputing every layer's activations in the backward costs about a third more compute per
step, so it should be on only where memory needs it. The checks before training measure the
step on the real hardware (the full-step check and its memory fit): with "auto" they measure it
without checkpointing first, and turn it on only when the fit cannot keep the configured
micro-batch that way, then measure again with it on so the fit the run uses is the
checkpointed step's. true and false are used as written.

The resolved value travels in the run's spec (`RunSpec.gradient_checkpointing`), and the run
records it beside its config (`resolved_gradient_checkpointing`, as `resolved_precision`).
Without a measurement (preflight off, or a resumed run whose start recorded nothing) "auto"
is on: the choice that fits wherever the other does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.config.training import TrainingConfig
from tunedeck.core.rundir import CHECKPOINT_CONFIG
from tunedeck.engine.host.memory_fit import MemoryFitDecision
from tunedeck.eval.config_groups import RESOLVED_CHECKPOINTING_KEY

RESOLVED_KEY = RESOLVED_CHECKPOINTING_KEY  # beside the run's config, as `resolved_precision`
REASON_KEY = "gradient_checkpointing_reason"


@dataclass(frozen=True)
class CheckpointingChoice:
    """Whether the run recomputes activations, the setting it came from, and why."""

    enabled: bool
    setting: bool | str  # true, false or "auto", as configured
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the run spec carries it from the checks to the run)."""
        return {"enabled": self.enabled, "setting": self.setting, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Any) -> CheckpointingChoice:
        """The form `to_dict` wrote; ValueError when it is not."""
        if not (isinstance(data, dict) and isinstance(data.get("enabled"), bool)):
            raise ValueError('expected {"enabled": true or false, "setting": ..., "reason": ...}')
        return cls(bool(data["enabled"]), data.get("setting", "auto"), str(data.get("reason", "")))

    def describe(self) -> str:
        """One line for the run's events."""
        return f"gradient checkpointing: {'on' if self.enabled else 'off'} ({self.reason})"


def fits_without_checkpointing(fit: MemoryFitDecision | None) -> bool:
    """Whether a fit measured without checkpointing keeps the configured micro-batch (None: nothing measured fits)."""
    return fit is not None and fit.fits and not fit.changed


def resolve_gradient_checkpointing(setting: bool | str, fits_without: bool | None) -> CheckpointingChoice:
    """The run's checkpointing from the config's `setting` and, for "auto", the memory fit without it.

    `fits_without` is whether the step measured without checkpointing keeps the configured
    micro-batch under the memory cap (`fits_without_checkpointing`); None when it was not
    measured, where "auto" is on.
    """
    if isinstance(setting, bool):
        return CheckpointingChoice(setting, setting, f"gradient_checkpointing: {str(setting).lower()}")
    if fits_without is None:
        return CheckpointingChoice(True, setting, 'auto: on, no memory measurement said the step fits without it')
    if fits_without:
        return CheckpointingChoice(
            False, setting, "auto: off, the step measured before training fits in memory without it"
        )
    return CheckpointingChoice(
        True, setting, "auto: on, the step measured before training does not fit in memory without it"
    )


def run_checkpointing(config: TrainingConfig, decided: CheckpointingChoice | None, checkpoint: Path | None) -> (
    CheckpointingChoice
):
    """The run's choice: `decided` by the checks before training, else the resumed `checkpoint`'s, else the rule's."""
    setting = config.gradient_checkpointing
    if isinstance(setting, bool):
        return resolve_gradient_checkpointing(setting, None)
    if decided is not None:
        return decided
    recorded = recorded_choice(checkpoint) if checkpoint is not None else None
    if recorded is not None:
        return CheckpointingChoice(recorded, setting, f"auto: {'on' if recorded else 'off'}, as when the run started")
    return resolve_gradient_checkpointing(setting, None)


def recorded_choice(checkpoint: Path) -> bool | None:
    """The resolved checkpointing the run saved with `checkpoint` (its config's derived values); None when absent."""
    try:
        document = json.loads((checkpoint / CHECKPOINT_CONFIG).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    value = document.get("derived", {}).get(RESOLVED_KEY) if isinstance(document, dict) else None
    return value if isinstance(value, bool) else None


def with_checkpointing(config: TrainingConfig, enabled: bool) -> TrainingConfig:
    """`config` with gradient_checkpointing set to the resolved `enabled` (not validated again)."""
    return config.model_copy(update={"gradient_checkpointing": enabled})
