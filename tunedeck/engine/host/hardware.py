"""What the machine can do, and the precision and attention kernel a run gets on it.

`HardwareProfile` is plain data so tests can describe any machine; `detect_hardware`
fills it from torch. Decisions are made before training so a run never starts on a
choice the hardware cannot honour.
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict, dataclass
from typing import Any, Literal

from tunedeck.core.errors import HardwareError
from tunedeck.core.precision import auto_precision
from tunedeck.engine.host.rocm_facts import RocmFacts

Backend = Literal["cuda", "rocm", "mps", "cpu"]
ResolvedPrecision = Literal["bf16", "fp16", "fp32"]


@dataclass(frozen=True)
class HardwareProfile:
    """The accelerator a run would use and what it supports."""

    backend: Backend
    device_name: str
    device_count: int = 1
    capability: tuple[int, int] | None = None  # CUDA compute capability
    supports_bf16: bool = False
    supports_fp16: bool = False
    total_memory_bytes: int | None = None
    torch_version: str = ""
    cuda_version: str | None = None
    hip_version: str | None = None
    flash_attn_installed: bool = False
    bitsandbytes_installed: bool = False
    rocm: RocmFacts | None = None  # a ROCm build of torch: the AMD stack and which kernels ran on it

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for env.json."""
        return asdict(self)


def cpu_profile(rocm: RocmFacts | None = None) -> HardwareProfile:
    """A CPU-only machine (what the test suite runs on); `rocm` when torch is a ROCm build that sees no GPU."""
    import torch

    return HardwareProfile(backend="cpu", device_name="cpu", torch_version=torch.__version__, rocm=rocm)


def detect_hardware() -> HardwareProfile:
    """Describe the first accelerator torch sees, or the CPU."""
    import torch

    flash = importlib.util.find_spec("flash_attn") is not None
    bnb = importlib.util.find_spec("bitsandbytes") is not None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        hip = getattr(torch.version, "hip", None)
        return HardwareProfile(
            backend="rocm" if hip else "cuda",
            device_name=torch.cuda.get_device_name(0),
            device_count=torch.cuda.device_count(),
            capability=(props.major, props.minor),
            supports_bf16=_native_bf16(torch, props.major, hip),
            supports_fp16=True,
            total_memory_bytes=int(props.total_memory),
            torch_version=torch.__version__,
            cuda_version=torch.version.cuda,
            hip_version=hip,
            flash_attn_installed=flash,
            bitsandbytes_installed=bnb,
            rocm=_rocm_facts(torch, torch.cuda.device_count()) if hip else None,
        )
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return HardwareProfile(
            backend="mps",
            device_name="Apple GPU (mps)",
            supports_bf16=bool(mps.is_macos_or_newer(14, 0)) if hasattr(mps, "is_macos_or_newer") else False,
            supports_fp16=True,
            torch_version=torch.__version__,
        )
    # A ROCm build of torch that sees no GPU: the facts say why (no driver, an unsupported GPU).
    return cpu_profile(_rocm_facts(torch, 0) if getattr(torch.version, "hip", None) else None)


def _rocm_facts(torch: Any, device_count: int) -> RocmFacts:
    from tunedeck.engine.host.rocm_facts import detect_rocm_facts

    return detect_rocm_facts(torch, device_count)


def _native_bf16(torch: Any, major: int, hip: str | None) -> bool:
    """bf16 in hardware: compute capability 8.0 or later on CUDA; what torch reports on ROCm.

    `torch.cuda.is_bf16_supported()` counts emulated bf16 by default (a Turing card can hold
    bf16 tensors but has no bf16 units), which would make "auto" pick a slow, emulated bf16
    over native fp16 on pre-Ampere GPUs; emulation is excluded, and CUDA is judged on the
    capability of the device the profile describes.
    """
    if hip:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    return major >= 8


def resolve_precision(requested: str, hardware: HardwareProfile) -> ResolvedPrecision:
    """bf16/fp16/fp32 for `mixed_precision`; `auto` picks the best the hardware has.

    CPU runs in fp32: torch can autocast to bf16 on a CPU, but without native bf16 units it
    is slower than fp32 and changes results, so it is refused rather than silently slow.
    """
    if requested == "auto":
        return auto_precision(
            supports_bf16=hardware.supports_bf16, supports_fp16=hardware.supports_fp16, backend=hardware.backend
        )
    if requested == "fp32":
        return "fp32"
    if requested == "bf16" and not hardware.supports_bf16:
        alternative = "fp16" if hardware.supports_fp16 and hardware.backend != "cpu" else "fp32"
        raise HardwareError(
            f'mixed_precision: "bf16" is not supported on {_describe(hardware)}; '
            f'use "{alternative}" or "auto" (expected one of the precisions this hardware has)'
        )
    if requested == "fp16" and not hardware.supports_fp16:
        raise HardwareError(f'mixed_precision: "fp16" is not supported on {_describe(hardware)}; use "fp32" or "auto"')
    if requested in ("bf16", "fp16"):
        return requested  # type: ignore[return-value]
    raise HardwareError(f'mixed_precision: unknown value "{requested}" (expected bf16, fp16, fp32 or auto)')


def resolve_attention(requested: str, hardware: HardwareProfile, precision: str, model_class: Any) -> str:
    """The attention kernel: flash_attention_2 when installed and usable, else sdpa, else eager.

    FlashAttention 2 needs the package, a CUDA/ROCm GPU of compute capability 8.0 or later,
    half precision and a model class that implements it.
    """
    supports_flash = bool(getattr(model_class, "_supports_flash_attn", False)) or bool(
        getattr(model_class, "_supports_flash_attn_2", False)
    )
    supports_sdpa = bool(getattr(model_class, "_supports_sdpa", False))
    flash_ok, why_not = _flash_usable(hardware, precision, supports_flash)
    if requested == "flash_attention_2":
        if not flash_ok:
            raise HardwareError(f'attn_implementation: "flash_attention_2" is not usable: {why_not}; use "auto"')
        return "flash_attention_2"
    if requested == "sdpa" and not supports_sdpa:
        name = getattr(model_class, "__name__", "this model")
        raise HardwareError(f'attn_implementation: {name} has no sdpa kernel; use "auto"')
    if requested in ("sdpa", "eager"):
        return requested
    if flash_ok:
        return "flash_attention_2"
    return "sdpa" if supports_sdpa else "eager"


def _flash_usable(hardware: HardwareProfile, precision: str, model_supports: bool) -> tuple[bool, str]:
    if not hardware.flash_attn_installed:
        return False, "the flash_attn package is not installed"
    if hardware.backend == "rocm" and hardware.rocm is not None and not hardware.rocm.flash_attn.usable:
        return False, f"its kernels do not run on this ROCm stack ({hardware.rocm.flash_attn.detail})"
    if hardware.backend not in ("cuda", "rocm"):
        return False, f"it needs a CUDA or ROCm GPU (found {hardware.backend})"
    if hardware.backend == "cuda" and (hardware.capability or (0, 0)) < (8, 0):
        return False, f"it needs compute capability 8.0 or later (found {hardware.capability})"
    if precision not in ("bf16", "fp16"):
        return False, "it needs bf16 or fp16 (found fp32)"
    if not model_supports:
        return False, "this model class does not implement it"
    return True, ""


def check_qlora(hardware: HardwareProfile) -> None:
    """Raise HardwareError unless 4-bit QLoRA can run here (CUDA and bitsandbytes, or a ROCm stack where they ran)."""
    if hardware.backend == "rocm":
        missing = _rocm_bitsandbytes_missing(hardware)
        if missing:
            raise HardwareError(
                f'peft_method: "qlora" needs bitsandbytes\' 4-bit kernels, which this ROCm stack lacks ({missing}); '
                f'use peft_method "lora" in {"bf16" if hardware.supports_bf16 else "fp16"}'
            )
        return
    if hardware.backend != "cuda":
        raise HardwareError(
            f'peft_method: "qlora" needs a CUDA GPU with bitsandbytes (found {_describe(hardware)}); '
            'use peft_method "lora"'
        )
    if not hardware.bitsandbytes_installed:
        raise HardwareError('peft_method: "qlora" needs the bitsandbytes package; install it or use "lora"')


# The trainer's name for each `optim` value.
_TRAINER_OPTIMIZERS = {
    "adamw": "adamw_torch_fused",  # fused on every device torch supports it (CPU included since 2.8)
    "adamw_8bit": "adamw_bnb_8bit",
    "paged_adamw_8bit": "paged_adamw_8bit",
    "adafactor": "adafactor",
}
_EIGHT_BIT = frozenset({"adamw_8bit", "paged_adamw_8bit"})


def trainer_optimizer(optim: str, hardware: HardwareProfile) -> str:
    """The trainer's optimizer name for the `optim` key; HardwareError when it cannot run here.

    The 8-bit optimizers are bitsandbytes kernels for CUDA GPUs, and for ROCm GPUs where they ran.
    On ROCm "adamw" gets torch's fused kernel only where it ran; otherwise the unfused AdamW
    (the same updates, a little slower).
    """
    if hardware.backend == "rocm":
        missing = _rocm_bitsandbytes_missing(hardware) if optim in _EIGHT_BIT else None
        if missing:
            raise HardwareError(
                f'optim: "{optim}" needs bitsandbytes\' 8-bit kernels, which this ROCm stack on '
                f'{_describe(hardware)} lacks ({missing}); use "adamw", or "adafactor" for the least optimizer memory'
            )
        if optim == "adamw" and hardware.rocm is not None and not hardware.rocm.fused_adamw.usable:
            return "adamw_torch"
        return _TRAINER_OPTIMIZERS[optim]
    if optim in _EIGHT_BIT and hardware.backend != "cuda":
        raise HardwareError(
            f'optim: "{optim}" needs a CUDA GPU with bitsandbytes (found {_describe(hardware)}); '
            'use "adamw", or "adafactor" for the least optimizer memory'
        )
    if optim in _EIGHT_BIT and not hardware.bitsandbytes_installed:
        raise HardwareError(f'optim: "{optim}" needs the bitsandbytes package; install it or use "adamw"')
    return _TRAINER_OPTIMIZERS[optim]


def _rocm_bitsandbytes_missing(hardware: HardwareProfile) -> str | None:
    """Why bitsandbytes' kernels cannot run on this ROCm machine; None when its probe ran them."""
    if hardware.rocm is None:
        return "not probed on this machine"
    probe = hardware.rocm.bitsandbytes
    return None if probe.usable else probe.detail


def _describe(hardware: HardwareProfile) -> str:
    if hardware.backend == "cpu":
        return "this CPU"
    return f"{hardware.device_name} ({hardware.backend})"
