"""What `mixed_precision: auto` becomes, from a reported hardware profile (no torch involved)."""

from __future__ import annotations

from tunedeck.core.precision import auto_precision_of


def test_auto_is_bf16_where_supported_else_fp16_on_a_gpu_else_fp32() -> None:
    assert auto_precision_of({"backend": "cuda", "supports_bf16": True, "supports_fp16": True}) == "bf16"
    assert auto_precision_of({"backend": "cuda", "supports_bf16": False, "supports_fp16": True}) == "fp16"
    assert auto_precision_of({"backend": "mps", "supports_bf16": False, "supports_fp16": True}) == "fp32"
    assert auto_precision_of({"backend": "cpu"}) == "fp32"
    assert auto_precision_of({}) == "fp32"
