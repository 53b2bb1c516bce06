"""Counting tokens seen on the host instead of the device.

With `include_num_input_tokens_seen`, the trainer sums the batch's attention mask on the
device and reads it back with `.item()` after every micro-batch: a host synchronisation per
step on an accelerator, which stops the host from queueing the next step while the current
one runs. The sum is also wrong for packed batches, whose attention mask is a 4D
`(batch, 1, T, T)` block mask: it counts allowed query/key pairs, not tokens.

The collator already knows the count: every feature it receives is unpadded, so the
non-padding tokens are the sum of the feature lengths, a Python int. `TokenCountingCollator`
puts that int into the batch under `TOKEN_COUNT_KEY`; `TunedeckTrainer` built with
`count_tokens_on_host=True` (`tunedeck.engine.training.trainer`) takes it from there (no tensor read)
and removes the key before the batch reaches the model, in training and in evaluation alike.
The two always go together: the key must never reach a trainer that does not remove it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TOKEN_COUNT_KEY = "tunedeck_non_padding_tokens"


class TokenCountingCollator:
    """Wraps a collator; adds the batch's non-padding token count (a Python int) under `TOKEN_COUNT_KEY`."""

    def __init__(self, collator: Any) -> None:
        self.collator = collator

    def __call__(self, features: Sequence[dict[str, Any]]) -> Any:
        """Collate as the wrapped collator does, then note the tokens the features hold."""
        batch = self.collator(features)
        batch[TOKEN_COUNT_KEY] = sum(len(feature["input_ids"]) for feature in features)
        return batch


def token_counting(collator: Any, enabled: bool) -> Any:
    """`collator` wrapped in `TokenCountingCollator` when `enabled`, else `collator` itself."""
    return TokenCountingCollator(collator) if enabled else collator
