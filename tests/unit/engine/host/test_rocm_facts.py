"""Detecting the AMD stack: torch faked as a ROCm build, ROCm's files in a temporary folder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tunedeck.engine.host.hardware import HardwareProfile
from tunedeck.engine.host.rocm_facts import RocmFacts, base_arch, major_minor
from tunedeck.engine.host.rocm_probes import KernelProbe
from tunedeck.hostcheck.rocm_support import arch_of_hsa_version, hsa_version_of, sibling_arch


def _fake_rocm_device(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, arch: str, rocm: str | None) -> None:
    """Make torch a ROCm 7.1 build that sees one MI300X of `arch`; `rocm` is the system ROCm's version file."""
    import torch

    props = SimpleNamespace(major=9, minor=4, total_memory=192 * 2**30, name="MI300X", gcnArchName=arch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "AMD Instinct MI300X")
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["gfx90a", "gfx942"])
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    monkeypatch.setattr(torch.version, "hip", "7.1.25424-0f2d60242")
    monkeypatch.setattr(torch, "__version__", "2.13.0+rocm7.1")
    root = tmp_path / "rocm"
    (root / "bin").mkdir(parents=True)
    if rocm is not None:
        (root / ".info").mkdir()
        (root / ".info" / "version").write_text(f"{rocm}-120\n")
    monkeypatch.setenv("ROCM_PATH", str(root))
    monkeypatch.setenv("PATH", str(root / "bin"))  # no rocminfo or hipconfig on this machine
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "9.4.2")


def test_a_rocm_gpu_is_described_with_its_architecture_rocm_and_torch_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tunedeck.engine.host.hardware import detect_hardware

    _fake_rocm_device(monkeypatch, tmp_path, "gfx942:sramecc+:xnack-", "6.4.1")
    profile = detect_hardware()
    facts = profile.rocm
    assert profile.backend == "rocm" and facts is not None
    assert facts.gfx_archs == ("gfx942",) and facts.torch_archs == ("gfx90a", "gfx942")
    assert facts.torch_rocm == "7.1" and facts.torch_hip == "7.1.25424-0f2d60242"
    assert facts.system_rocm == "6.4.1" and facts.system_rocm_source == str(tmp_path / "rocm" / ".info" / "version")
    assert facts.system_hip is None  # no hipconfig here
    assert facts.hsa_override_gfx_version == "9.4.2"
    assert facts.kernel and facts.os_label
    # This CPU build of torch cannot run a kernel on the faked GPU: every probe says so, none assumes.
    for probe in (facts.bitsandbytes, facts.flash_attn, facts.triton, facts.fused_adamw):
        assert probe.usable is False and probe.detail


def test_without_a_version_file_the_system_rocm_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tunedeck.engine.host.hardware import detect_hardware

    _fake_rocm_device(monkeypatch, tmp_path, "gfx90a", None)
    facts = detect_hardware().rocm
    assert facts is not None and facts.system_rocm is None and facts.gfx_archs == ("gfx90a",)


def test_a_rocm_build_that_sees_no_gpu_still_reports_its_facts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import torch

    from tunedeck.engine.host.hardware import detect_hardware

    _fake_rocm_device(monkeypatch, tmp_path, "gfx942", "7.1.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    profile = detect_hardware()
    assert profile.backend == "cpu" and profile.rocm is not None
    assert profile.rocm.torch_rocm == "7.1" and profile.rocm.gfx_archs == ()  # no rocminfo either
    assert profile.rocm.fused_adamw == KernelProbe(
        False, profile.rocm.fused_adamw.version, "no AMD GPU visible to torch"
    )


def test_a_cuda_or_cpu_build_of_torch_has_no_rocm_facts(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from tunedeck.engine.host.hardware import detect_hardware

    monkeypatch.setattr(torch.version, "hip", None)
    assert detect_hardware().rocm is None


def test_env_json_records_the_rocm_facts() -> None:
    from tunedeck.engine.host.environment import capture_environment

    facts = RocmFacts(os_id="ubuntu", os_version="24.04", gfx_archs=("gfx942",), torch_rocm="7.1", system_rocm="7.1.0")
    hardware = HardwareProfile(backend="rocm", device_name="MI300X", hip_version="7.1.25424", rocm=facts)
    recorded = capture_environment(hardware)["hardware"]["rocm"]
    assert recorded["gfx_archs"] == ("gfx942",) and recorded["system_rocm"] == "7.1.0"
    assert recorded["bitsandbytes"] == {"usable": False, "version": None, "detail": "not probed"}


def test_a_probe_that_raises_is_not_usable_and_says_why() -> None:
    import torch

    from tunedeck.engine.host.rocm_probes import _probe

    def ran(_: object, device: str) -> None:
        assert device == "cuda:0"

    def broken(_: object, device: str) -> None:
        raise RuntimeError("HIP error: invalid device function\nmore")

    probe = _probe(torch, 1, "torch", broken, "cuda:0")
    assert probe.usable is False and probe.detail == "RuntimeError: HIP error: invalid device function"
    assert _probe(torch, 1, "torch", ran, "cuda:0").usable is True
    assert _probe(torch, 0, "torch", ran, "cuda").detail == "no AMD GPU visible to torch"
    missing = _probe(torch, 1, "no-such-package-here", ran, "cuda:0")
    assert missing.detail == "no-such-package-here is not installed"


@pytest.mark.parametrize(
    ("text", "expected"), [("7.1.25424-0f2d", "7.1"), ("6.4.1-120", "6.4"), ("2.13.0+rocm7.1", "2.13"), ("", None)]
)
def test_major_minor(text: str, expected: str | None) -> None:
    assert major_minor(text) == expected


def test_architecture_names_and_overrides_convert_both_ways() -> None:
    assert base_arch("gfx90a:sramecc+:xnack-") == "gfx90a"
    assert hsa_version_of("gfx1030") == "10.3.0" and arch_of_hsa_version("10.3.0") == "gfx1030"
    assert hsa_version_of("gfx90a") == "9.0.10" and arch_of_hsa_version("9.0.10") == "gfx90a"
    assert arch_of_hsa_version("ten") is None and hsa_version_of("sm_80") is None
    assert sibling_arch("gfx1031", ("gfx942", "gfx1030")) == "gfx1030"
    assert sibling_arch("gfx90c", ("gfx90a",)) is None  # not a Radeon generation: no stand-in offered


def test_tunedeck_env_shows_the_rocm_stack() -> None:
    from dataclasses import asdict

    from tunedeck.cli.env_command import console, render

    facts = RocmFacts(
        os_name="Ubuntu 24.04.1 LTS",
        kernel="6.8.0",
        gfx_archs=("gfx942",),
        torch_rocm="7.1",
        system_rocm="7.1.0",
        bitsandbytes=KernelProbe(True, "0.48.0", "ran on this GPU"),
    )
    with console.capture() as captured:
        render({"hardware": {"backend": "rocm", "rocm": asdict(facts)}})
    shown = " ".join(captured.get().split())
    assert "GPU architecture │ gfx942" in shown and "ROCm (system) │ 7.1.0" in shown
    assert "bitsandbytes yes" in shown and "fused_adamw no" in shown


def test_each_process_probes_the_gpu_its_launcher_gave_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from tunedeck.engine.host import rocm_probes

    seen: list[str] = []
    monkeypatch.setattr(rocm_probes, "_fused_adamw", lambda _, device: seen.append(device))
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert rocm_probes.probe_kernels(torch, 4)["fused_adamw"].usable is True
    monkeypatch.delenv("LOCAL_RANK")
    rocm_probes.probe_kernels(torch, 4)
    assert seen == ["cuda:3", "cuda:0"]


def test_qlora_on_rocm_follows_the_probe_and_the_alternative_keeps_the_gpus_precision() -> None:
    from tunedeck.core.errors import HardwareError
    from tunedeck.engine.host.hardware import check_qlora

    lacking = RocmFacts(bitsandbytes=KernelProbe(False, "0.50.2", "RuntimeError: no ROCm binary for gfx1030"))
    rdna2 = HardwareProfile(backend="rocm", device_name="Radeon PRO W6800", supports_fp16=True, rocm=lacking)
    with pytest.raises(HardwareError, match=r'no ROCm binary for gfx1030\); use peft_method "lora" in fp16'):
        check_qlora(rdna2)
    with pytest.raises(HardwareError, match="not probed on this machine"):
        check_qlora(HardwareProfile(backend="rocm", device_name="MI250", supports_bf16=True))
    check_qlora(HardwareProfile(backend="rocm", device_name="MI300X", rocm=RocmFacts(bitsandbytes=KernelProbe(True))))
