"""Precision, attention and QLoRA decisions per hardware profile."""

from __future__ import annotations

import pytest

from tunedeck.core.errors import HardwareError
from tunedeck.engine.host.hardware import (
    HardwareProfile,
    check_qlora,
    resolve_attention,
    resolve_precision,
    trainer_optimizer,
)

CPU = HardwareProfile(backend="cpu", device_name="cpu")
AMPERE = HardwareProfile(
    backend="cuda",
    device_name="A100",
    capability=(8, 0),
    supports_bf16=True,
    supports_fp16=True,
    flash_attn_installed=True,
    bitsandbytes_installed=True,
)
TURING = HardwareProfile(backend="cuda", device_name="T4", capability=(7, 5), supports_fp16=True)
ROCM = HardwareProfile(backend="rocm", device_name="MI250", supports_bf16=True, supports_fp16=True)


class FlashModel:
    _supports_flash_attn = True
    _supports_sdpa = True


class SdpaModel:
    _supports_sdpa = True


class EagerModel:
    pass


@pytest.mark.parametrize(
    ("requested", "hardware", "expected"),
    [
        ("auto", CPU, "fp32"),
        ("auto", AMPERE, "bf16"),
        ("auto", TURING, "fp16"),
        ("auto", ROCM, "bf16"),
        ("fp32", AMPERE, "fp32"),
        ("bf16", AMPERE, "bf16"),
        ("fp16", TURING, "fp16"),
    ],
)
def test_precision_resolves_per_hardware(requested: str, hardware: HardwareProfile, expected: str) -> None:
    assert resolve_precision(requested, hardware) == expected


@pytest.mark.parametrize(
    ("requested", "hardware", "alternative"),
    [("bf16", CPU, "fp32"), ("fp16", CPU, "fp32"), ("bf16", TURING, "fp16")],
)
def test_missing_precision_names_reason_and_alternative(
    requested: str, hardware: HardwareProfile, alternative: str
) -> None:
    with pytest.raises(HardwareError) as caught:
        resolve_precision(requested, hardware)
    message = str(caught.value)
    assert f'"{requested}" is not supported' in message
    assert f'"{alternative}"' in message


def test_attention_prefers_flash_when_usable_else_sdpa_else_eager() -> None:
    assert resolve_attention("auto", AMPERE, "bf16", FlashModel) == "flash_attention_2"
    assert resolve_attention("auto", AMPERE, "fp32", FlashModel) == "sdpa"  # flash needs half precision
    assert resolve_attention("auto", TURING, "fp16", FlashModel) == "sdpa"  # capability 7.5
    assert resolve_attention("auto", CPU, "fp32", SdpaModel) == "sdpa"
    assert resolve_attention("auto", CPU, "fp32", EagerModel) == "eager"


def test_explicit_flash_attention_that_cannot_run_is_refused() -> None:
    with pytest.raises(HardwareError, match="flash_attn package is not installed"):
        resolve_attention("flash_attention_2", CPU, "fp32", FlashModel)
    with pytest.raises(HardwareError, match="does not implement it"):
        resolve_attention("flash_attention_2", AMPERE, "bf16", SdpaModel)


def test_qlora_needs_cuda_and_bitsandbytes() -> None:
    check_qlora(AMPERE)
    with pytest.raises(HardwareError, match='use peft_method "lora"'):
        check_qlora(CPU)
    with pytest.raises(HardwareError, match="bitsandbytes"):
        check_qlora(TURING)


def test_the_optim_key_names_the_trainers_optimizer_and_8_bit_needs_cuda_and_bitsandbytes() -> None:
    assert trainer_optimizer("adamw", CPU) == "adamw_torch_fused"
    assert trainer_optimizer("adafactor", CPU) == "adafactor"
    assert trainer_optimizer("adamw_8bit", AMPERE) == "adamw_bnb_8bit"
    assert trainer_optimizer("paged_adamw_8bit", AMPERE) == "paged_adamw_8bit"
    with pytest.raises(HardwareError, match=r'optim: "adamw_8bit" needs a CUDA GPU .*this CPU.*use "adamw"'):
        trainer_optimizer("adamw_8bit", CPU)
    with pytest.raises(HardwareError, match=r"paged_adamw_8bit.*\(rocm\)"):
        trainer_optimizer("paged_adamw_8bit", ROCM)
    with pytest.raises(HardwareError, match="needs the bitsandbytes package"):
        trainer_optimizer("adamw_8bit", TURING)


def _fake_cuda_device(monkeypatch: pytest.MonkeyPatch, major: int, minor: int, name: str) -> None:
    """Make torch see one CUDA GPU of compute capability `major.minor`, as torch 2.13 reports it."""
    from types import SimpleNamespace

    import torch

    props = SimpleNamespace(major=major, minor=minor, total_memory=16 * 2**30, name=name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.version, "hip", None)
    # torch's default counts emulation: a Turing card can hold bf16 tensors, so it says True.
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation or major >= 8
    )


def test_pre_ampere_cuda_has_no_bf16_and_auto_picks_fp16(monkeypatch: pytest.MonkeyPatch) -> None:
    from tunedeck.engine.host.hardware import detect_hardware

    _fake_cuda_device(monkeypatch, 7, 5, "Tesla T4")
    hardware = detect_hardware()
    assert hardware.backend == "cuda" and hardware.capability == (7, 5)
    assert hardware.supports_bf16 is False and hardware.supports_fp16 is True
    assert resolve_precision("auto", hardware) == "fp16"
    with pytest.raises(HardwareError, match=r'"bf16" is not supported on Tesla T4.*use "fp16"'):
        resolve_precision("bf16", hardware)


def test_ampere_cuda_reports_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    from tunedeck.engine.host.hardware import detect_hardware

    _fake_cuda_device(monkeypatch, 8, 0, "A100")
    hardware = detect_hardware()
    assert hardware.supports_bf16 is True
    assert resolve_precision("auto", hardware) == "bf16"
