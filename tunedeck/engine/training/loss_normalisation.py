"""How a run's trainer normalises the training loss over the micro-batches of one optimizer step.

The transformers Trainer counts the labelled tokens of all micro-batches of a step
(`num_items_in_batch`) and divides each micro-batch's summed loss by that count when the model
(or a custom loss function) accepts the count: every labelled token of the step weighs the same,
as in one large batch. Otherwise each micro-batch's mean loss is divided by the number of
micro-batches: a token in a short micro-batch weighs more. Preference trainers average their
loss over the pairs of each micro-batch. The run records which one it used; the accumulation
check before training reads the same rule from the trial trainer.
"""

from __future__ import annotations

from typing import Any

PER_TOKEN = "per token across the accumulated micro-batches"
PER_MICRO_BATCH = "per micro-batch"


def loss_normalisation(trainer: Any, task: str) -> str:
    """`PER_TOKEN` or `PER_MICRO_BATCH`: how `trainer` (built for `task`) normalises the loss of a step."""
    from tunedeck.config.preference import is_preference_task

    if is_preference_task(task):
        return PER_MICRO_BATCH
    counts_tokens = bool(getattr(trainer, "model_accepts_loss_kwargs", False)) or (
        getattr(trainer, "compute_loss_func", None) is not None
    )
    return PER_TOKEN if counts_tokens else PER_MICRO_BATCH
