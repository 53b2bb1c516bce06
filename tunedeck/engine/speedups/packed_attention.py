"""The torch side of packing: batches where packed examples never attend to one another.

Why not transformers' `DataCollatorWithFlattening`: it relies on the model spotting packed
rows from `position_ids`, and transformers only does that when no cache object exists. Causal
LMs create a cache whenever `use_cache` is on (the config default, also during training), so
with sdpa or eager the second example of a row attends to the first. This collator does not
depend on that detection:

* sdpa, eager: an explicit 4D block-diagonal causal mask, `(batch, 1, T, T)`; transformers
  hands a 4D mask to the attention kernel unchanged. sdpa gets a boolean mask (True = may
  attend); eager adds the mask to the scores, so it gets 0 / the dtype's minimum.
* flash-attention 2/3: no mask; every pack is flattened into one row and the varlen kernel
  gets the example boundaries (`cu_seq_lens_*`, `max_length_*`) explicitly.
* per-example sdpa (`per_example_attention`, where flash-attention is not installed): the same
  flattened row and boundaries as flash-attention; sdpa runs per group of examples of similar
  length, so neither the `T × T` mask nor the masked-out scores are ever computed. Which of
  the mask and this path a run takes is `packed_attention_path.choose_packed_attention`'s call.

Position ids restart at 0 for each example, so rotary and learned position embeddings see
what they would see unpacked. Padding (sdpa/eager, several packs per batch) sits at position
0 with label -100 and attends only to itself, so it never mixes into real tokens and never
makes a fully masked softmax row.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tunedeck.core.errors import HardwareError
from tunedeck.core.token_labels import IGNORE_INDEX
from tunedeck.engine.speedups.per_example_attention import PER_EXAMPLE_ATTENTION

MASKED_ATTENTION = ("sdpa", "eager")
VARLEN_ATTENTION = ("flash_attention_2", "flash_attention_3")
# Implementations that take the example boundaries of one flattened row instead of a mask.
BOUNDARY_ATTENTION = (*VARLEN_ATTENTION, PER_EXAMPLE_ATTENTION)
PACKING_ATTENTION = MASKED_ATTENTION + BOUNDARY_ATTENTION

# Position schemes that a per-token position id does not describe: packing would shift them.
_UNSUPPORTED_MODEL_TYPES = frozenset({"bloom", "mpt", "falcon", "baichuan", "jais"})
_ENCODER_MODEL_TYPES = frozenset({"bert", "roberta", "distilbert", "deberta", "deberta-v2", "electra",
                                  "xlm-roberta", "modernbert"})


@dataclass
class PackedCollator:
    """Collates packed rows (`input_ids`, `labels`, `position_ids` per row) for HF Trainer.

    Build it with `PackedCollator.for_model(model)` so the mask matches the model's attention
    implementation and dtype.
    """

    attn_implementation: str
    dtype: Any = None  # torch dtype of the eager additive mask; float32 when None
    pad_token_id: int = 0
    pad_to_multiple_of: int | None = None

    def __post_init__(self) -> None:
        if self.attn_implementation not in PACKING_ATTENTION:
            raise HardwareError(
                f"packing is not supported with attention implementation {self.attn_implementation!r}; "
                f"use one of {', '.join(PACKING_ATTENTION)} or turn packing off"
            )

    @classmethod
    def for_model(cls, model: Any, *, pad_token_id: int | None = None,
                  pad_to_multiple_of: int | None = None) -> PackedCollator:
        """A collator matching `model`'s attention implementation and parameter dtype."""
        config = model.config
        pad = pad_token_id if pad_token_id is not None else getattr(config, "pad_token_id", None)
        return cls(
            attn_implementation=str(getattr(config, "_attn_implementation", None)),
            dtype=getattr(model, "dtype", None),
            pad_token_id=int(pad) if pad is not None else 0,
            pad_to_multiple_of=pad_to_multiple_of,
        )

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Stack packed rows into tensors, with the attention inputs the backend needs."""
        for feature in features:
            positions = feature["position_ids"]
            if len(positions) and positions[0] != 0:
                raise ValueError("a packed row must start with position 0 (the start of an example)")
        if self.attn_implementation in BOUNDARY_ATTENTION:
            return _flattened_batch(features)
        return self._masked_batch(features)

    def _masked_batch(self, features: Sequence[dict[str, Any]]) -> dict[str, Any]:
        import torch

        width = max(len(f["input_ids"]) for f in features)
        if self.pad_to_multiple_of:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        ids, labels, positions = [], [], []
        for feature in features:
            pad = width - len(feature["input_ids"])
            ids.append(list(feature["input_ids"]) + [self.pad_token_id] * pad)
            labels.append(list(feature["labels"]) + [IGNORE_INDEX] * pad)
            positions.append(list(feature["position_ids"]) + [0] * pad)
        position_ids = torch.tensor(positions, dtype=torch.long)
        allowed = block_causal_mask(position_ids)
        if self.attn_implementation == "eager":
            dtype = self.dtype or torch.float32
            mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
        else:
            mask = allowed
        return {
            "input_ids": torch.tensor(ids, dtype=torch.long),
            "labels": torch.tensor(labels, dtype=torch.long),
            "position_ids": position_ids,
            "attention_mask": mask,
        }


def block_causal_mask(position_ids: Any) -> Any:
    """Boolean `(batch, 1, T, T)` mask: token q may see token k iff same example and k ≤ q.

    An example starts wherever the position id is 0, so each padding token (position 0) is an
    example of its own and sees only itself.
    """
    import torch

    segments = torch.cumsum(position_ids == 0, dim=-1)
    same = segments[:, :, None] == segments[:, None, :]
    length = position_ids.shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool, device=position_ids.device).tril()
    return (same & causal)[:, None, :, :]


def _flattened_batch(features: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """All packs in one row, boundaries given to the attention (varlen or per-example); no padding at all."""
    import torch

    ids: list[int] = []
    labels: list[int] = []
    positions: list[int] = []
    for feature in features:
        ids.extend(feature["input_ids"])
        labels.extend(feature["labels"])
        positions.extend(feature["position_ids"])
    starts = [i for i, p in enumerate(positions) if p == 0] + [len(positions)]
    cu_seq_lens = torch.tensor(starts, dtype=torch.int32)
    longest = int(max(b - a for a, b in itertools.pairwise(starts)))
    return {
        "input_ids": torch.tensor([ids], dtype=torch.long),
        "labels": torch.tensor([labels], dtype=torch.long),
        "position_ids": torch.tensor([positions], dtype=torch.long),
        "cu_seq_lens_q": cu_seq_lens,
        "cu_seq_lens_k": cu_seq_lens,
        "max_length_q": longest,
        "max_length_k": longest,
    }


def packing_problem(model: Any, max_length: int | None = None) -> str | None:
    """Why packing would not be exact for `model`, or None when the collator handles it."""
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no config, so its attention implementation is unknown"
    if getattr(config, "is_encoder_decoder", False):
        return "packing applies to decoder-only causal language models, not encoder-decoder models"
    if not getattr(config, "is_causal", True) or getattr(config, "model_type", "") in _ENCODER_MODEL_TYPES:
        return "packing applies to causal language models, not bidirectional encoders"
    implementation = getattr(config, "_attn_implementation", None)
    if implementation not in PACKING_ATTENTION:
        return (f"attention implementation {implementation!r} cannot take the block-diagonal mask or "
                f"varlen boundaries; use one of {', '.join(PACKING_ATTENTION)}")
    model_type = getattr(config, "model_type", "")
    if model_type in _UNSUPPORTED_MODEL_TYPES or getattr(config, "alibi", False):
        return (f"model type {model_type!r} derives positions from the attention mask, "
                "which packing would shift")
    window = getattr(config, "sliding_window", None)
    uses_window = getattr(config, "use_sliding_window", True)
    if window and uses_window and (max_length is None or max_length > window):
        # A 4D mask replaces the model's own mask, sliding window included.
        return (f"the model uses sliding-window attention (window {window}); packing is exact only with "
                f"max_length ≤ {window}" + ("" if max_length is None else f" (found {max_length})"))
    forward = getattr(model, "forward", None)
    if forward is not None:
        parameters = inspect.signature(forward).parameters
        accepts_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        if "position_ids" not in parameters and not accepts_kwargs:
            return "the model's forward takes no position_ids, so positions cannot restart per example"
    return None


def supports_packing(model: Any, max_length: int | None = None) -> bool:
    """Whether `PackedCollator` keeps packed examples apart for this model (static checks)."""
    return packing_problem(model, max_length) is None


def require_packing_support(model: Any, max_length: int | None = None) -> None:
    """Raise HardwareError saying why when packing would let examples attend to one another."""
    problem = packing_problem(model, max_length)
    if problem is not None:
        raise HardwareError(f"packing is not possible for this model: {problem}; set packing: false")


def verify_packing(model: Any, *, tolerance: float | None = None, vocab_limit: int = 1000) -> float:
    """Run two short examples packed and alone; return the largest logit difference.

    A preflight check on the real model, catching architectures the static checks do not know.
    Raises HardwareError when the difference exceeds `tolerance` (1e-4 in fp32, 5e-2 in 16-bit).
    """
    import torch

    require_packing_support(model)
    parameter = next(model.parameters())
    device, dtype = parameter.device, parameter.dtype
    if tolerance is None:
        tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    vocab = min(int(model.config.vocab_size), vocab_limit)
    generator = torch.Generator().manual_seed(0)
    first = torch.randint(0, vocab, (11,), generator=generator).tolist()
    second = torch.randint(0, vocab, (7,), generator=generator).tolist()
    collator = PackedCollator.for_model(model)
    feature = {"input_ids": first + second, "labels": first + second,
               "position_ids": list(range(len(first))) + list(range(len(second)))}
    batch = {k: (v.to(device) if hasattr(v, "to") else v) for k, v in collator([feature]).items()}
    batch.pop("labels")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            packed = model(**batch, use_cache=False).logits[0].float()
            alone = [model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0].float()
                     for ids in (first, second)]
    finally:
        model.train(was_training)
    difference = float((packed - torch.cat(alone)).abs().max())
    if difference > tolerance:
        raise HardwareError(
            f"packing is not exact for this model: packed logits differ from unpacked ones "
            f"by {difference:.3g} "
            f"(tolerance {tolerance:g}); set packing: false"
        )
    return difference
