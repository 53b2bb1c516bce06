"""Per-token loss of packed rows against the same examples run alone: the exactness check of packing.

`verify_packing` (in `packed_attention`) compares logits of two toy examples; this check runs
real training rows through the real collator and compares what training optimises, the
per-token cross-entropy, so a mask, position or label-boundary mistake anywhere in the
packed path shows up as a difference. In fp32 the difference stays near 1e-6.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.core.token_labels import IGNORE_INDEX
from tunedeck.data.packing import Pack, packed_features
from tunedeck.data.tokenize import TokenizedRows


@dataclass(frozen=True)
class PackedLossComparison:
    """How far packed per-token losses are from unpacked ones."""

    max_abs_difference: float
    tokens_compared: int
    packs_compared: int
    examples_compared: int

    def to_dict(self) -> dict[str, float | int]:
        """JSON-ready form."""
        return {
            "max_abs_difference": self.max_abs_difference,
            "tokens_compared": self.tokens_compared,
            "packs_compared": self.packs_compared,
            "examples_compared": self.examples_compared,
        }


def per_token_losses(logits: Any, labels: Any) -> Any:
    """Cross-entropy of each position that has a label, after the causal shift, in fp32, in order."""
    import torch

    shifted_logits = logits[..., :-1, :].reshape(-1, logits.shape[-1]).float()
    shifted_labels = labels[..., 1:].reshape(-1)
    losses = torch.nn.functional.cross_entropy(
        shifted_logits, shifted_labels, reduction="none", ignore_index=IGNORE_INDEX
    )
    return losses[shifted_labels != IGNORE_INDEX]


def compare_packed_losses(
    model: Any, tokenized: TokenizedRows, packs: Sequence[Pack], *, max_packs: int = 4
) -> PackedLossComparison:
    """Run up to `max_packs` packs through `PackedCollator` and each of their examples alone; compare losses.

    Alone, an example's first label never counts (nothing precedes it); packed, it is ignored
    so nothing predicts across a boundary: both sides score the same tokens, in the same order.
    """
    import torch

    from tunedeck.engine.speedups.packed_attention import PackedCollator

    collator = PackedCollator.for_model(model)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    worst, tokens, examples = 0.0, 0, 0
    chosen = list(packs)[:max_packs]
    try:
        with torch.no_grad():
            for pack, feature in zip(chosen, packed_features(tokenized, chosen), strict=True):
                batch = {k: (v.to(device) if hasattr(v, "to") else v) for k, v in collator([feature]).items()}
                labels = batch.pop("labels")
                packed = per_token_losses(model(**batch, use_cache=False).logits, labels)
                alone = []
                for index in pack.indices:
                    ids = torch.tensor([list(tokenized.input_ids[index])], device=device)
                    example_labels = torch.tensor([list(tokenized.labels[index])], device=device)
                    alone.append(per_token_losses(model(input_ids=ids, use_cache=False).logits, example_labels))
                reference = torch.cat(alone)
                if packed.shape != reference.shape:
                    raise AssertionError(f"packed row scores {packed.numel()} tokens, alone {reference.numel()}")
                if packed.numel():
                    worst = max(worst, float((packed - reference).abs().max()))
                tokens += int(packed.numel())
                examples += len(pack.indices)
    finally:
        model.train(was_training)
    return PackedLossComparison(worst, tokens, len(chosen), examples)
