"""Check 1 on AMD GPUs: the ROCm stack against the support table, and CUDA-first options probed, not assumed.

The machines are described, as the CUDA tests describe theirs: a `HardwareProfile` with the
`RocmFacts` a ROCm build of torch would detect. The supported machine is read from the
shipped table, so the tests follow the table when it is updated.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.unit.engine.preflight.preflight_data import chat_spec
from tunedeck.engine.host.hardware import HardwareProfile
from tunedeck.engine.host.rocm_facts import RocmFacts
from tunedeck.engine.host.rocm_probes import KernelProbe
from tunedeck.engine.preflight import run_preflight
from tunedeck.engine.preflight.report import CheckResult
from tunedeck.hostcheck.rocm_support import rocm_support

TORCH = "2.13.0"
TABLE = rocm_support()
ROCM = TABLE.torch_builds[TORCH.rsplit(".", 1)[0]][0]  # a ROCm release torch is published for
GFX = TABLE.gfx[ROCM][0]
OS_ID, OS_VERSIONS = next(iter(TABLE.os[ROCM].items()))
RAN = KernelProbe(True, "1.0", "ran on this GPU")
ABSENT = KernelProbe(False, None, "bitsandbytes is not installed")

SUPPORTED_FACTS = RocmFacts(
    os_id=OS_ID,
    os_version=OS_VERSIONS[0],
    os_name=f"{OS_ID} {OS_VERSIONS[0]}",
    kernel="6.8.0-49-generic",
    gfx_archs=(GFX,),
    torch_rocm=ROCM,
    torch_hip=f"{ROCM}.25424-0f2d60242",
    torch_archs=TABLE.gfx[ROCM],
    system_rocm=f"{ROCM}.0",
    system_rocm_source="/opt/rocm/.info/version",
    system_hip=f"{ROCM}.25424-0f2d60242",
    kfd_present=True,
    bitsandbytes=RAN,
    flash_attn=RAN,
    triton=RAN,
    fused_adamw=RAN,
)
MI300 = HardwareProfile(
    backend="rocm",
    device_name="AMD Instinct MI300X",
    supports_bf16=True,
    supports_fp16=True,
    torch_version=f"{TORCH}+rocm{ROCM}",
    hip_version=SUPPORTED_FACTS.torch_hip,
    flash_attn_installed=True,
    bitsandbytes_installed=True,
    rocm=SUPPORTED_FACTS,
)
AMPERE = HardwareProfile(
    backend="cuda",
    device_name="A100",
    capability=(8, 0),
    supports_bf16=True,
    supports_fp16=True,
    torch_version=f"{TORCH}+cu128",
    cuda_version="12.8",
    bitsandbytes_installed=True,
)


def _machine(**facts: Any) -> HardwareProfile:
    return replace(MI300, rocm=replace(SUPPORTED_FACTS, **facts))


def _stack(hardware: HardwareProfile, model: Path, folder: Path, **config: Any) -> CheckResult:
    return run_preflight(chat_spec(model, folder, **config), hardware=hardware, only={1}).check(1)


def test_a_supported_combination_passes_and_names_the_rocm_facts(tiny_llama_dir: Path, tmp_path: Path) -> None:
    stack = _stack(MI300, tiny_llama_dir, tmp_path, mixed_precision="bf16")
    assert stack.status == "pass", stack.message
    assert f"ROCm {ROCM} (torch built for ROCm {ROCM}" in stack.message and GFX in stack.message
    assert stack.figures["rocm_gfx_archs"] == [GFX] and stack.figures["rocm_system_version"] == f"{ROCM}.0"
    assert stack.figures["rocm_os_id"] == OS_ID and stack.figures["rocm_kernel"] == "6.8.0-49-generic"
    assert stack.figures["rocm_kernels"]["bitsandbytes"]["usable"] is True
    assert stack.figures["rocm_support_table"]["sources"]  # the table names where it comes from


def test_torch_built_for_another_rocm_than_the_machines_fails_with_the_fix(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    stack = _stack(_machine(system_rocm="6.2.4"), tiny_llama_dir, tmp_path)
    assert stack.status == "fail"
    assert f"torch was built for ROCm {ROCM} but this machine has ROCm 6.2" in stack.message
    assert any(f"upgrade ROCm to {ROCM}" in line for line in stack.advice)


def test_a_system_rocm_torch_is_also_published_for_gets_the_wheel_index_fix(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    builds = TABLE.torch_builds[TORCH.rsplit(".", 1)[0]]
    other = next((build for build in builds if build != ROCM), None)
    if other is None:  # the table lists one build: the upgrade fix above is the only one
        return
    stack = _stack(_machine(system_rocm=f"{other}.0"), tiny_llama_dir, tmp_path)
    assert stack.status == "fail"
    assert any(f"install torch=={TORCH} from the ROCm {other} wheel index" in line for line in stack.advice)


def test_an_unsupported_architecture_fails_and_names_the_override_only_for_a_sibling(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    old = _stack(_machine(gfx_archs=("gfx803",)), tiny_llama_dir, tmp_path)
    assert old.status == "fail"
    assert f"gfx803 is not in ROCm {ROCM}'s supported architectures" in old.message
    assert not any("HSA_OVERRIDE_GFX_VERSION" in line for line in old.advice)
    supported = TABLE.gfx[ROCM]
    sibling = next(arch for arch in supported if arch.startswith("gfx11"))
    cousin = sibling[:-1] + ("f" if sibling[-1] != "f" else "e")
    near = _stack(_machine(gfx_archs=(cousin,)), tiny_llama_dir, tmp_path)
    assert near.status == "fail"
    assert any("HSA_OVERRIDE_GFX_VERSION=" in line and sibling in line for line in near.advice)


def test_an_architecture_override_to_a_supported_sibling_warns(tiny_llama_dir: Path, tmp_path: Path) -> None:
    from tunedeck.hostcheck.rocm_support import hsa_version_of

    sibling = next(arch for arch in TABLE.gfx[ROCM] if arch.startswith("gfx11"))
    cousin = sibling[:-1] + "f"
    override = hsa_version_of(sibling)
    stack = _stack(_machine(gfx_archs=(cousin,), hsa_override_gfx_version=override), tiny_llama_dir, tmp_path)
    assert stack.status == "warn", stack.message
    assert f"HSA_OVERRIDE_GFX_VERSION={override} runs {sibling}'s kernels on this {cousin}" in stack.message


def test_torch_without_kernels_for_the_gpu_fails(tiny_llama_dir: Path, tmp_path: Path) -> None:
    without = tuple(arch for arch in TABLE.gfx[ROCM] if arch != GFX)
    stack = _stack(_machine(torch_archs=without), tiny_llama_dir, tmp_path)
    assert stack.status == "fail" and f"torch's kernels were not compiled for {GFX}" in stack.message


def test_an_unsupported_operating_system_warns_with_the_supported_list(tiny_llama_dir: Path, tmp_path: Path) -> None:
    stack = _stack(_machine(os_id="arch", os_version=None, os_name="Arch Linux"), tiny_llama_dir, tmp_path)
    assert stack.status == "warn", stack.message
    assert f"Arch Linux (kernel 6.8.0-49-generic) is not among ROCm {ROCM}'s supported operating systems" in (
        stack.message
    )
    assert OS_ID in stack.message
    old_release = _stack(_machine(os_version="1.0"), tiny_llama_dir, tmp_path)
    assert old_release.status == "warn" and "supported operating systems" in old_release.message


def test_a_rocm_build_of_torch_that_sees_no_gpu_fails_naming_the_missing_driver(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    facts = replace(SUPPORTED_FACTS, kfd_present=False, system_rocm=None, system_rocm_source=None, gfx_archs=())
    no_gpu = HardwareProfile(backend="cpu", device_name="cpu", torch_version=f"{TORCH}+rocm{ROCM}", rocm=facts)
    stack = _stack(no_gpu, tiny_llama_dir, tmp_path)
    assert stack.status == "fail"
    assert f"torch is a ROCm {ROCM} build but sees no AMD GPU: the ROCm kernel driver is not loaded" in stack.message
    assert any(f"install ROCm {ROCM}" in line for line in stack.advice)
    uninstalled = replace(no_gpu, rocm=replace(facts, kfd_present=True))
    assert "ROCm is not installed" in _stack(uninstalled, tiny_llama_dir, tmp_path).message


def test_no_system_rocm_beside_a_working_gpu_warns(tiny_llama_dir: Path, tmp_path: Path) -> None:
    stack = _stack(_machine(system_rocm=None, system_rocm_source=None, system_hip=None), tiny_llama_dir, tmp_path)
    assert stack.status == "warn" and "no system ROCm found" in stack.message


def test_qlora_without_bitsandbytes_rocm_kernels_is_refused_with_lora_in_bf16(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    refused = _stack(_machine(bitsandbytes=ABSENT), tiny_llama_dir, tmp_path, peft_method="qlora")
    assert refused.status == "fail"
    assert "needs bitsandbytes' 4-bit kernels, which this ROCm stack lacks (bitsandbytes is not installed)" in (
        refused.message
    )
    assert 'use peft_method "lora" in bf16' in refused.message
    ran = _stack(MI300, tiny_llama_dir, tmp_path, peft_method="qlora", mixed_precision="bf16")
    assert ran.status == "pass", ran.message


def test_8_bit_optimizers_follow_the_bitsandbytes_probe(tiny_llama_dir: Path, tmp_path: Path) -> None:
    failed = KernelProbe(False, "0.48.0", "RuntimeError: no kernel image for gfx1030")
    refused = _stack(_machine(bitsandbytes=failed), tiny_llama_dir, tmp_path, optim="adamw_8bit")
    assert refused.status == "fail" and "no kernel image for gfx1030" in refused.message
    assert any('optim "adamw"' in line for line in refused.advice)
    assert _stack(MI300, tiny_llama_dir, tmp_path, optim="adamw_8bit").figures["optimizer"] == "adamw_bnb_8bit"


def test_flash_attention_that_does_not_run_is_refused_with_the_sdpa_alternative(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    broken = KernelProbe(False, "2.8.3", "ImportError: undefined symbol")
    machine = _machine(flash_attn=broken)
    refused = _stack(machine, tiny_llama_dir, tmp_path, attn_implementation="flash_attention_2", mixed_precision="bf16")
    assert refused.status == "fail"
    assert "its kernels do not run on this ROCm stack (ImportError: undefined symbol)" in refused.message
    assert any("sdpa" in line for line in refused.advice)
    auto = _stack(machine, tiny_llama_dir, tmp_path, mixed_precision="bf16")
    assert auto.status == "pass" and auto.figures["rocm_attention_note"].endswith(": sdpa")


def test_torch_compile_needs_triton_and_adamw_falls_back_to_the_unfused_kernel(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    missing = KernelProbe(False, None, "triton is not installed")
    refused = _stack(_machine(triton=missing), tiny_llama_dir, tmp_path, torch_compile=True)
    assert refused.status == "fail" and "torch_compile: true needs triton's ROCm kernels" in refused.message
    assert any("torch_compile: false" in line for line in refused.advice)
    unfused = _stack(
        _machine(fused_adamw=KernelProbe(False, TORCH, "RuntimeError: no fused kernel")), tiny_llama_dir, tmp_path
    )
    assert unfused.figures["optimizer"] == "adamw_torch"
    assert _stack(MI300, tiny_llama_dir, tmp_path).figures["optimizer"] == "adamw_torch_fused"


def test_a_cuda_machine_runs_no_rocm_check(tiny_llama_dir: Path, tmp_path: Path) -> None:
    stack = _stack(AMPERE, tiny_llama_dir, tmp_path, peft_method="qlora", mixed_precision="bf16")
    assert stack.status == "pass", stack.message
    assert not [key for key in stack.figures if key.startswith("rocm")]
    assert "ROCm" not in stack.message


def test_the_table_is_consistent_and_names_its_sources() -> None:
    assert TABLE.sources and TABLE.reviewed
    for release, builds in TABLE.torch_builds.items():
        for build in builds:
            assert TABLE.archs_of(build), f"torch {release} is built for ROCm {build}, which the table does not list"
            assert TABLE.os.get(build), build
    assert TABLE.os_supported(ROCM, OS_ID, OS_VERSIONS[0] + ".3")
    assert not TABLE.os_supported(ROCM, OS_ID, "1.0")
