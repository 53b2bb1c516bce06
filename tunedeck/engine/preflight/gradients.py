"""The gradients of one optimizer step of a trial trainer, and how far two such gradients are apart.

The numerics checks (accumulation, activation checkpointing) compare the gradients two ways of
computing the same step give. Each way runs the run's own trainer (`PreflightContext.trial_trainer`)
for one optimizer step: the gradients are copied at the moment the optimizer would apply them,
and the step is then stopped, so the weights stay as they were. Dropout is off during the
comparison (its random masks would differ between the two ways), and gradient clipping is off
(it rescales each way by its own norm).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.engine.preflight.context import PreflightContext

# The relative difference two ways of computing one step's gradients may show: float32 sums in
# another order differ in the last digits; a half-precision forward rounds every activation.
TOLERANCE_BY_PRECISION = {"fp32": 1e-3, "bf16": 5e-2, "fp16": 5e-2}


def tolerance_for(precision: str | None) -> float:
    """The relative gradient difference allowed at `precision` (the half-precision figure when unknown)."""
    return TOLERANCE_BY_PRECISION.get(str(precision), TOLERANCE_BY_PRECISION["bf16"])


class _Captured(Exception):
    """Raised from the callback once the gradients are copied: the step ends before the optimizer runs."""


@dataclass
class StepGradients:
    """One step's gradients (float32, on the host) by parameter name, and the normalisation the trainer used."""

    gradients: dict[str, Any]
    normalisation: str


def step_gradients(
    ctx: PreflightContext,
    dataset: Any,
    output_dir: Path,
    *,
    micro_batch: int,
    accumulation: int,
    activation_checkpointing: bool,
) -> StepGradients:
    """The gradients of one optimizer step of `accumulation` micro-batches of `micro_batch` over `dataset`."""
    from transformers import TrainerCallback

    from tunedeck.engine.training.loss_normalisation import loss_normalisation

    model = ctx.loaded.model
    captured: dict[str, Any] = {}

    class CaptureGradients(TrainerCallback):  # type: ignore[misc]
        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            for name, parameter in model.named_parameters():
                if parameter.requires_grad and parameter.grad is not None:
                    captured[name] = parameter.grad.detach().float().cpu().clone()
            raise _Captured

    trainer = ctx.trial_trainer(
        dataset, output_dir, micro_batch=micro_batch, accumulation=accumulation, max_steps=1,
        callbacks=[CaptureGradients()],
    )  # fmt: skip
    trainer.args.max_grad_norm = 0.0
    trainer.args.activation_checkpointing = activation_checkpointing
    trainer.args.activation_checkpointing_kwargs = {"use_reentrant": False} if activation_checkpointing else None
    normalisation = loss_normalisation(trainer, ctx.config.task)
    try:
        with _checkpointing_restored(model), _dropout_off(model):
            trainer.train()
    except _Captured:
        pass
    finally:
        trainer.optimizer = None
        model.zero_grad(set_to_none=True)
        del trainer
    if not captured:
        raise RuntimeError("the step produced no gradients for the trained parameters")
    return StepGradients(captured, normalisation)


def relative_difference(measured: dict[str, Any], reference: dict[str, Any]) -> float:
    """‖measured − reference‖ / ‖reference‖ over every parameter; a parameter one side lacks counts as zero there.

    Infinite when the reference gradient is zero (or not finite): nothing to compare against.
    """
    import torch

    def squared(tensor: Any) -> float:
        return float(torch.sum(tensor.double() ** 2))

    difference = 0.0
    for name in set(measured) | set(reference):
        if name in measured and name in reference:
            difference += squared(measured[name] - reference[name])
        else:
            difference += squared(measured.get(name, reference.get(name)))
    size = sum(squared(gradient) for gradient in reference.values())
    if size == 0.0 or not math.isfinite(size):
        return math.inf
    return math.sqrt(difference / size)


@contextmanager
def _checkpointing_restored(model: Any) -> Iterator[None]:
    """Activation checkpointing off before the step (the trainer turns it on when asked), as it was after."""
    was_on = bool(getattr(model, "is_activation_checkpointing", False))
    _set_checkpointing(model, False)
    try:
        yield
    finally:
        if bool(getattr(model, "is_activation_checkpointing", False)) != was_on:
            _set_checkpointing(model, was_on)


def _set_checkpointing(model: Any, on: bool) -> None:
    if on:
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is not None:
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        return
    disable = getattr(model, "activation_checkpointing_disable", None)
    if disable is not None and getattr(model, "is_activation_checkpointing", False):
        disable()


@contextmanager
def _dropout_off(model: Any) -> Iterator[None]:
    """Every dropout module and attention-dropout rate at zero for the step, restored afterwards."""
    import torch

    changed: list[tuple[Any, str, float]] = []
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p:
            changed.append((module, "p", module.p))
            module.p = 0.0
        rate = getattr(module, "attention_dropout", None)
        if isinstance(rate, float) and rate:
            changed.append((module, "attention_dropout", rate))
            module.attention_dropout = 0.0
    try:
        yield
    finally:
        for module, name, value in changed:
            setattr(module, name, value)
