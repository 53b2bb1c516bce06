"""Which model a preference run compares itself with, and how it is held in memory."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from tunedeck.config.preference import needs_reference_copy
from tunedeck.config.training import TrainingConfig
from tunedeck.engine.models.init_from import REFERENCE_ADAPTER, TRAINED_ADAPTER


@dataclass(frozen=True)
class ReferenceChoice:
    """The reference model to hand the trainer (None: none needed, or the adapter toggled off) and why."""

    model: Any | None
    description: str


def choose_reference(config: TrainingConfig, model: Any, uses_peft: bool) -> ReferenceChoice:
    """The reference of a preference run of `config` on `model` (already loaded, adapter attached).

    orpo needs none; reference-free dpo takes zero log-probabilities. With an adapter the trainer
    keeps a frozen copy of the starting adapter under the name "ref" (adapter-sized, never a copy
    of the model): a new LoRA adapter starts as a no-op, so the reference is then the base model;
    a run that continues another job's adapter compares itself with that job's model. A full
    fine-tune keeps a frozen copy of the starting weights (which the memory fit counts).
    """
    if config.task == "orpo":
        return ReferenceChoice(None, "none: orpo adds an odds-ratio term to the sft loss, with no reference model")
    if config.task == "dpo" and config.reference_free:
        return ReferenceChoice(None, "none: reference_free takes the reference log-probabilities as zero")
    if uses_peft:
        peft_config = getattr(model, "peft_config", None) or {}
        if REFERENCE_ADAPTER in peft_config:
            return ReferenceChoice(None, "the starting adapter (another job's), kept frozen beside the trained one")
        return ReferenceChoice(
            None, "the base model: a frozen copy of the new adapter, which starts as a no-op (no copy of the model)"
        )
    if not needs_reference_copy(config):
        return ReferenceChoice(None, "none")
    frozen = copy.deepcopy(model)
    frozen.eval()
    for parameter in frozen.parameters():
        parameter.requires_grad_(False)
    return ReferenceChoice(frozen, "a frozen copy of the starting model (counted by the memory fit)")


def rewind_to_reference(model: Any, reference: ReferenceChoice) -> bool:
    """Put `model`'s trained weights back to its reference's, so that the two agree again; False when it has none.

    The reference is where training started: the frozen "ref" adapter a trainer keeps beside
    the trained one, or a full fine-tune's frozen copy. orpo and reference-free dpo have no
    reference to go back to.
    """
    import torch

    if reference.model is not None:
        with torch.no_grad():
            start = dict(reference.model.named_parameters())
            for name, parameter in model.named_parameters():
                parameter.copy_(start[name])
        return True
    peft_config = getattr(model, "peft_config", None)
    if not isinstance(peft_config, dict) or REFERENCE_ADAPTER not in peft_config:
        return False
    copy_adapter(model, REFERENCE_ADAPTER, getattr(model, "active_adapter", TRAINED_ADAPTER))
    return True


def keep_start_as_reference(model: Any) -> None:
    """Copy `model`'s trained adapter, as it is now, into a frozen "ref" adapter (as the trainers do at start).

    For a model rebuilt at the start of a run and then given later weights (a checkpoint read
    outside the trainer), so its reference is still where the run started. Nothing is done when
    the model has a "ref" adapter already (a continued adapter's).
    """

    peft_config = getattr(model, "peft_config", None)
    if not isinstance(peft_config, dict) or REFERENCE_ADAPTER in peft_config:
        return
    model.add_adapter(REFERENCE_ADAPTER, peft_config[TRAINED_ADAPTER])
    copy_adapter(model, TRAINED_ADAPTER, REFERENCE_ADAPTER)
    for name, parameter in model.named_parameters():
        if f".{REFERENCE_ADAPTER}." in name:
            parameter.requires_grad_(False)


def copy_adapter(model: Any, source: str, target: str) -> None:
    """Copy the weights of adapter `source` into adapter `target` (same configuration) of `model`."""
    import torch

    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, parameter in parameters.items():
            if f".{source}." in name:
                parameters[name.replace(f".{source}.", f".{target}.")].copy_(parameter)
