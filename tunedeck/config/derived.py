"""Values derived from a config and a dataset size: steps, warmup, effective batch size.

The arithmetic mirrors the trainer's (no dropped last batch; a short last accumulation
window still counts as an optimizer step), so the numbers shown before a run match the run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import Issue


@dataclass(frozen=True)
class DerivedValues:
    """Schedule quantities of one run."""

    effective_batch_size: int
    micro_batches_per_epoch: int
    steps_per_epoch: int
    total_steps: int
    warmup_steps: int

    def to_dict(self) -> dict[str, int]:
        """JSON-ready form."""
        return asdict(self)


def derive_values(config: TrainingConfig, train_examples: int, processes: int = 1) -> DerivedValues:
    """Steps per epoch, total and warmup steps for `train_examples` rows spread over `processes`."""
    if train_examples < 1:
        raise ValueError("the training set is empty")
    if processes < 1:
        raise ValueError("processes must be at least 1")
    micro_batches = math.ceil(train_examples / (config.batch_size * processes))
    steps_per_epoch = max(math.ceil(micro_batches / config.gradient_accumulation_steps), 1)
    total = config.epochs * steps_per_epoch
    return DerivedValues(
        effective_batch_size=config.batch_size * config.gradient_accumulation_steps * processes,
        micro_batches_per_epoch=micro_batches,
        steps_per_epoch=steps_per_epoch,
        total_steps=total,
        # "constant" is a fixed rate for the whole run (the job config keys' meaning); warming up is what
        # "constant_with_warmup" is for, so warmup_ratio does not apply to it (and
        # `config_warnings` says so when the user sets both).
        warmup_steps=0 if config.lr_scheduler == "constant" else warmup_steps_for(config.warmup_ratio, total),
    )


def warmup_steps_for(warmup_ratio: float, total_steps: int) -> int:
    """Whole warmup steps for a ratio: rounded up, so any non-zero ratio warms up at least one step,
    but never every step.

    The trainer's warmup starts at a learning rate of 0 (step k of w trains at k/w of the peak): a
    warmup spanning every step of a one-step run would make that step at 0 and leave the weights
    as they were. At least one step therefore always runs past the warmup, at the peak rate.
    """
    return min(math.ceil(total_steps * warmup_ratio), max(total_steps - 1, 0))


def steps_at_zero_rate(derived: DerivedValues) -> int:
    """How many optimizer steps run at a learning rate of 0: the first one when there is a warmup."""
    return 1 if derived.warmup_steps > 0 and derived.total_steps > 0 else 0


def schedule_refusals(config: TrainingConfig, derived: DerivedValues, source: str | None = None) -> list[Issue]:
    """Why a run with this schedule would not train at all: no optimizer step, or every step at rate 0.

    The checks before training refuse such a run (it would report success with its starting weights).
    """
    more_steps = (
        f"more data, more epochs (now {config.epochs}), or a smaller effective batch "
        f"(now {derived.effective_batch_size})"
    )
    if derived.total_steps < 1:
        return [Issue("the run would make 0 optimizer steps", field="epochs", file=source, expected=more_steps)]
    if steps_at_zero_rate(derived) >= derived.total_steps:
        return [Issue(
            f"every one of the {derived.total_steps} optimizer step(s) would run at learning rate 0 "
            f"({derived.warmup_steps} warmup step(s))",
            field="warmup_ratio", file=source,
            expected=f"a lower warmup_ratio (now {config.warmup_ratio:g}), or {more_steps}",
        )]  # fmt: skip
    return []
