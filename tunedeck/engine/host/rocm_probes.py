"""Whether the kernels that are CUDA-first elsewhere run on this ROCm GPU: each is tried, not assumed.

bitsandbytes (4-bit QLoRA, 8-bit optimizers), flash-attention, triton (torch.compile) and
torch's fused AdamW ship ROCm builds for some architectures and ROCm releases only, so an
installed package proves nothing: each probe imports the library and runs one tiny kernel
on this process's GPU, and records the version and, when it fails, why.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_NO_GPU = "no AMD GPU visible to torch"


@dataclass(frozen=True)
class KernelProbe:
    """Whether a library's GPU kernels ran on this machine, its version, and what the probe saw."""

    usable: bool
    version: str | None = None
    detail: str = ""


def probe_kernels(torch: Any, device_count: int) -> dict[str, KernelProbe]:
    """One probe per library (keys are `RocmFacts` fields); each runs on this process's GPU when there is one.

    That GPU is the one the launcher gives the process (LOCAL_RANK under torchrun, else the
    first): the probes run before the process picks its device, and every process of a
    multi-GPU run probing GPU 0 would leave a runtime context there in each of them.
    """
    device = f"cuda:{int(os.environ.get('LOCAL_RANK') or 0) % device_count}" if device_count else "cuda"
    probes: dict[str, tuple[str, Callable[[Any, str], None]]] = {
        "bitsandbytes": ("bitsandbytes", _bitsandbytes_4bit),
        "flash_attn": ("flash_attn", _flash_attention),
        "triton": ("triton", _triton),
        "fused_adamw": ("torch", _fused_adamw),
    }
    return {name: _probe(torch, device_count, package, run, device) for name, (package, run) in probes.items()}


def _probe(torch: Any, device_count: int, package: str, run: Callable[[Any, str], None], device: str) -> KernelProbe:
    try:
        version: str | None = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return KernelProbe(False, None, f"{package} is not installed")
    if not device_count:
        return KernelProbe(False, version, _NO_GPU)
    try:
        run(torch, device)
    except Exception as error:  # any failure (import, missing binary for this GPU, launch) means not usable
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        return KernelProbe(False, version, f"{type(error).__name__}: {first_line}")
    return KernelProbe(True, version, "ran on this GPU")


def _bitsandbytes_4bit(torch: Any, device: str) -> None:
    functional = importlib.import_module("bitsandbytes.functional")
    weights = torch.randn(64, 64, device=device, dtype=torch.float16)
    packed, state = functional.quantize_4bit(weights, quant_type="nf4")
    functional.dequantize_4bit(packed, state)
    torch.cuda.synchronize(device)


def _flash_attention(torch: Any, device: str) -> None:
    flash_attn = importlib.import_module("flash_attn")
    q = torch.randn(1, 16, 2, 64, device=device, dtype=torch.float16)
    flash_attn.flash_attn_func(q, q, q, causal=True)
    torch.cuda.synchronize(device)


def _triton(torch: Any, device: str) -> None:
    importlib.import_module("triton")
    # torch's own test: triton is importable and has a backend for this device.
    from torch.utils._triton import has_triton

    if not has_triton():
        raise RuntimeError("torch finds no triton backend for this GPU")


def _fused_adamw(torch: Any, device: str) -> None:
    weight = torch.nn.Parameter(torch.zeros(8, device=device))
    weight.grad = torch.ones_like(weight)
    torch.optim.AdamW([weight], lr=1e-3, fused=True).step()
    torch.cuda.synchronize(device)
