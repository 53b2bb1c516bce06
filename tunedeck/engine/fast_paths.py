"""Training fast paths that keep results identical: counting tokens on the host instead of the device.

With `include_num_input_tokens_seen`, the trainer sums the batch's attention mask on the
device and reads it back with `.item()` after every micro-batch: a host synchronisation per
step on an accelerator, which stops the host from queueing the next step while the current
one runs. The sum is also wrong for packed batches, whose attention mask is a 4D
`(batch, 1, T, T)` block mask: it counts allowed query/key pairs, not tokens.

The collator already knows the count: every feature it receives is unpadded, so the
non-padding tokens are the sum of the feature lengths, a Python int. `TokenCountingCollator`
puts that int into the batch under `TOKEN_COUNT_KEY`; `with_host_token_count` returns a
trainer class that takes it from there (no tensor read) and removes the key before the
batch reaches the model, in training and in evaluation alike. Where the trainer's private
hooks are missing (another transformers version), the trainer class is returned as is and
the trainer counts as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

TOKEN_COUNT_KEY = "tunedeck_non_padding_tokens"
_HOOKS = ("_prepare_inputs", "_track_num_input_tokens")


class TokenCountingCollator:
    """Wraps a collator; adds the batch's non-padding token count (a Python int) under `TOKEN_COUNT_KEY`."""

    def __init__(self, collator: Any) -> None:
        self.collator = collator

    def __call__(self, features: Sequence[dict[str, Any]]) -> Any:
        """Collate as the wrapped collator does, then note the tokens the features hold."""
        batch = self.collator(features)
        batch[TOKEN_COUNT_KEY] = sum(len(feature["input_ids"]) for feature in features)
        return batch


def supports_host_token_count(trainer_class: type) -> bool:
    """Whether `trainer_class` has the hooks `with_host_token_count` overrides."""
    return all(callable(getattr(trainer_class, hook, None)) for hook in _HOOKS)


def with_host_token_count(trainer_class: type) -> type:
    """A subclass of `trainer_class` that counts tokens from `TOKEN_COUNT_KEY` (or `trainer_class` itself)."""
    if not supports_host_token_count(trainer_class):
        return trainer_class

    class HostTokenCountTrainer(trainer_class):  # type: ignore[valid-type, misc]
        """The trainer, counting input tokens from the collator's host-side figure."""

        def _prepare_inputs(self, inputs: Any) -> Any:
            if isinstance(inputs, dict) and TOKEN_COUNT_KEY in inputs:
                inputs = {key: value for key, value in inputs.items() if key != TOKEN_COUNT_KEY}
            return super()._prepare_inputs(inputs)

        def _track_num_input_tokens(self, inputs: Any) -> None:
            count = inputs.get(TOKEN_COUNT_KEY) if isinstance(inputs, dict) else None
            if count is None:
                super()._track_num_input_tokens(inputs)
            elif self.args.include_num_input_tokens_seen != "no":
                # One process trains here (processes > 1 would need a sum over ranks, as the trainer does).
                self.state.num_input_tokens_seen += int(count)

    HostTokenCountTrainer.__name__ = f"HostTokenCount{trainer_class.__name__}"
    HostTokenCountTrainer.__qualname__ = HostTokenCountTrainer.__name__
    return HostTokenCountTrainer


def host_token_count(trainer_class: type, processes: int) -> tuple[type, Callable[[Any], Any]]:
    """The trainer class to build and the collator wrapper to apply, as one decision.

    On with one process and a trainer that has the hooks; otherwise the trainer class
    unchanged and a wrapper that changes nothing (the key must never reach a plain trainer).
    """
    if processes != 1 or not supports_host_token_count(trainer_class):
        return trainer_class, lambda collator: collator
    return with_host_token_count(trainer_class), TokenCountingCollator
