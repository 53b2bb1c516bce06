"""The trainer-arguments class of each preference task, and the task's own settings in it."""

from __future__ import annotations

from typing import Any

from tunedeck.config.preference import loss_types
from tunedeck.config.training import TrainingConfig


def preference_arguments(config: TrainingConfig) -> tuple[type[Any], dict[str, Any]]:
    """(TRL's config class for `config.task`, the task's settings to pass it beside the trainer's own).

    Sequences are already tokenized and cut to `max_length` by the data layer (which names the
    rows it cut), so the trainers' own `max_length` only repeats that bound. The reference of
    `reference_free` dpo is taken as zero log-probabilities, written beside each example before
    training (see `trainers`), so no reference model is ever loaded for it.
    """
    task = config.task
    if task == "dpo":
        from trl import DPOConfig

        return DPOConfig, {
            "beta": config.beta,
            "loss_type": loss_types(config),
            "loss_weights": config.loss_weights,
            "max_length": config.max_length,
            "precompute_ref_log_probs": config.reference_free,
        }
    if task == "orpo":
        from trl.experimental.orpo import ORPOConfig

        return ORPOConfig, {"beta": config.beta, "max_length": config.max_length}
    if task == "kto":
        from trl import KTOConfig

        kto_loss = config.loss_type if config.user_set("loss_type") and isinstance(config.loss_type, str) else "kto"
        return KTOConfig, {
            "beta": config.beta,
            "loss_type": kto_loss,
            "desirable_weight": config.desirable_weight,
            "undesirable_weight": config.undesirable_weight,
            "max_length": config.max_length,
        }
    raise ValueError(f"task {task!r} is not a preference task")
