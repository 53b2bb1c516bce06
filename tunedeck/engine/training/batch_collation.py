"""The collator a run batches with, including packing each micro-batch (`packing: "auto"`).

Three ways to batch sft examples:

* `packing: true` packed the whole dataset before training (`training_data.pack_splits`): each
  batch holds packed rows, so an epoch has fewer, fuller steps.
* `packing: "auto"` (the default) keeps the sampler's micro-batches exactly as they are and packs
  the examples of each one into rows of at most `max_length` tokens instead of padding them all
  to the longest. The step trains on the same examples and the same label tokens, so the loss
  (a sum over those tokens divided by their count, per micro-batch or over the accumulated
  batch) and its gradient are those of padded training, up to float summation order; what goes
  away is the compute spent on padding. It applies to sft on a model whose attention keeps
  packed examples apart (`packed_attention.packing_problem`); elsewhere batches are padded.
* `packing: false` pads every batch to its longest example.

When rows are packed, `packed_attention_path.choose_packed_attention` picks how they attend
(dense block-diagonal mask, per-example sdpa, or flash varlen) before the collator is built,
since the collator's output depends on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.config.preference import PREFERENCE_PADDING, is_preference_task
from tunedeck.config.training import TrainingConfig
from tunedeck.data.packing import pack_feature_rows
from tunedeck.engine.speedups.packed_attention import PackedCollator, packing_problem
from tunedeck.engine.speedups.packed_attention_path import PackedAttentionPath, choose_packed_attention
from tunedeck.engine.training.training_data import PaddingCollator

DATASET_PACKING = "dataset"
MICRO_BATCH_PACKING = "micro_batch"
NO_PACKING = "off"


@dataclass
class MicroBatchPackingCollator:
    """Packs one micro-batch's examples into as few rows of ≤ `max_length` tokens as fit, then collates them."""

    packed: PackedCollator
    max_length: int

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The micro-batch as packed rows with block-diagonal attention (or varlen boundaries)."""
        return self.packed(pack_feature_rows(features, self.max_length))


@dataclass(frozen=True)
class CollationChoice:
    """The collator, how it packs (`dataset`, `micro_batch` or `off`), when auto packing is off why, and the
    attention path of packed rows (None when nothing is packed)."""

    collator: Any
    packing: str
    reason: str | None = None
    attention: PackedAttentionPath | None = None


def choose_collator(loaded: Any, dataset_packed: bool, config: TrainingConfig) -> CollationChoice:
    """The collator for `loaded`'s model and `config`, given whether the splits are already packed."""
    pad_token_id = loaded.tokenizer.pad_token_id
    if dataset_packed:
        attention = choose_packed_attention(loaded.model, torch_compile=config.torch_compile)
        return CollationChoice(PackedCollator.for_model(loaded.model, pad_token_id=pad_token_id), DATASET_PACKING,
                               attention=attention)
    padding = PaddingCollator(pad_token_id, config.task)
    if config.packing != "auto":
        return CollationChoice(padding, NO_PACKING, "packing: false")
    if is_preference_task(config.task):
        return CollationChoice(padding, NO_PACKING, PREFERENCE_PADDING)
    if config.task != "sft":
        return CollationChoice(padding, NO_PACKING, f"task {config.task} batches one example per row")
    problem = packing_problem(loaded.model, config.max_length)
    if problem is not None:
        return CollationChoice(padding, NO_PACKING, problem)
    attention = choose_packed_attention(loaded.model, torch_compile=config.torch_compile)
    packed = PackedCollator.for_model(loaded.model, pad_token_id=pad_token_id)
    return CollationChoice(MicroBatchPackingCollator(packed, config.max_length), MICRO_BATCH_PACKING,
                           attention=attention)


def training_collator(loaded: Any, dataset_packed: bool, config: TrainingConfig) -> Any:
    """Just the collator of `choose_collator`."""
    return choose_collator(loaded, dataset_packed, config).collator
