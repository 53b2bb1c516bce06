"""What `mixed_precision: auto` becomes on a machine: one rule for the engine and the pages that predict it.

bf16 where the hardware has native bf16, else fp16 on a GPU, else fp32 (a CPU trains in fp32:
its bf16 autocast is slower than fp32 without native units). Plain values in, no torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Precision = Literal["bf16", "fp16", "fp32"]

GPU_BACKENDS = ("cuda", "rocm")
AUTO_RULE = "bf16 where the GPU supports it, else fp16, else fp32 (decided on the worker)"


def auto_precision(*, supports_bf16: bool, supports_fp16: bool, backend: str) -> Precision:
    """The precision `auto` picks on hardware with these capabilities: bf16, fp16 or fp32."""
    if supports_bf16:
        return "bf16"
    if supports_fp16 and backend in GPU_BACKENDS:
        return "fp16"
    return "fp32"


def auto_precision_of(hardware: Mapping[str, Any]) -> Precision:
    """`auto_precision` for a reported hardware profile (the `hardware` of a preflight report)."""
    return auto_precision(
        supports_bf16=bool(hardware.get("supports_bf16")),
        supports_fp16=bool(hardware.get("supports_fp16")),
        backend=str(hardware.get("backend") or "cpu"),
    )
