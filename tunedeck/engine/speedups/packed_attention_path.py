"""Which attention packed rows take: the dense block-diagonal mask, per-example sdpa, or flash varlen.

* flash-attention 2/3 already gets the example boundaries (`varlen`): nothing to choose.
* eager keeps its dense mask: whoever asks for eager asks for the reference computation.
* sdpa switches to per-example attention (`per_example_attention`) where it was measured
  faster than the dense mask and where it is exact for this model:
  - faster: measured on CPU (`benchmarks/packed_attention.py`, fp32, one thread: the attention
    alone 2.2× faster on a batch of 8 packed rows of 512 tokens, whole training runs 1.05×
    (`packing: "auto"`) and 1.07× (`packing: true`) the tokens per CPU-second, peak RSS 0.92×
    and 0.99×). On CUDA without flash-attention it has not been measured yet, so CUDA keeps
    the dense mask;
  - exact: before training, two short examples packed into one row must give the logits they
    give alone (`packed_attention.verify_packing`, run on the per-example path of this very
    model); otherwise the model goes back to sdpa with the dense mask, and the run says why;
  - `torch_compile` keeps the dense mask: the per-example path reads the boundaries on the
    host and its group shapes change from batch to batch, which would recompile the graph.

The choice switches the model's attention implementation (the per-example function hands
every input without boundaries to transformers' own sdpa, so evaluation and generation are
unchanged); the implementation is not saved with the model's config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunedeck.core.errors import HardwareError

DENSE_MASK = "dense_mask"
PER_EXAMPLE = "per_example"
VARLEN = "varlen"

# Device types where per-example sdpa was measured faster than the dense mask.
PER_EXAMPLE_MEASURED_FASTER = frozenset({"cpu"})


@dataclass(frozen=True)
class PackedAttentionPath:
    """The attention path of packed rows, and why it was taken."""

    path: str  # dense_mask | per_example | varlen
    reason: str
    # Largest logit difference, packed against alone, of the per-example check (None: not run).
    checked_difference: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, for the run's events."""
        return {"path": self.path, "reason": self.reason, "checked_difference": self.checked_difference}


def choose_packed_attention(model: Any, *, torch_compile: bool = False) -> PackedAttentionPath:
    """Pick the packed-row attention for `model` (switching it to per-example sdpa where that wins)."""
    from tunedeck.engine.speedups.packed_attention import VARLEN_ATTENTION, verify_packing
    from tunedeck.engine.speedups.per_example_attention import (
        PER_EXAMPLE_ATTENTION,
        register_per_example_attention,
    )

    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation in VARLEN_ATTENTION:
        return PackedAttentionPath(VARLEN, f"{implementation} takes the example boundaries")
    if implementation == PER_EXAMPLE_ATTENTION:
        return PackedAttentionPath(PER_EXAMPLE, "the model already attends per example")
    if implementation != "sdpa":
        return PackedAttentionPath(DENSE_MASK, f"attention implementation {implementation!r} takes the mask")
    device = _device_type(model)
    if device not in PER_EXAMPLE_MEASURED_FASTER:
        return PackedAttentionPath(DENSE_MASK, f"per-example attention is not measured faster on {device}")
    if torch_compile:
        return PackedAttentionPath(DENSE_MASK, "torch_compile: per-example group shapes would recompile the graph")
    set_attention(model, register_per_example_attention())
    try:
        difference = verify_packing(model)
    except (HardwareError, RuntimeError, TypeError, ValueError) as error:
        set_attention(model, "sdpa")
        return PackedAttentionPath(DENSE_MASK, f"per-example attention is not exact for this model ({error})")
    return PackedAttentionPath(PER_EXAMPLE, f"measured faster on {device}; packed logits match unpacked ones",
                               difference)


def set_attention(model: Any, implementation: str) -> None:
    """Switch `model` (a PEFT wrapper included) to the registered attention `implementation`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if hasattr(base, "set_attn_implementation"):
        base.set_attn_implementation(implementation)
    else:
        base.config._attn_implementation = implementation


def _device_type(model: Any) -> str:
    parameter = next(model.parameters(), None)
    return str(parameter.device.type) if parameter is not None else "cpu"
