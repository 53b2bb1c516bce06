"""Check 1 on AMD GPUs: the ROCm stack against the support table, and the options that need probed kernels.

Nothing is assumed from CUDA. The facts (`tunedeck.engine.host.rocm_facts`) are compared
with the table shipped in the package (`rocm_support.json`): torch built for the installed
ROCm, the GPU architecture supported by that ROCm and compiled into torch, the operating
system supported by that ROCm. A mismatch that breaks kernels fails with the fix; an
untested but often working setup (an unlisted distribution, an architecture override)
warns. The rules for bitsandbytes and flash-attention live with the other hardware rules
(`tunedeck.engine.host.hardware`); this module adds the torch.compile rule, which only ROCm
needs checking (triton comes with torch's CUDA builds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tunedeck.config.training import TrainingConfig
from tunedeck.engine.host.hardware import HardwareProfile
from tunedeck.engine.host.rocm_facts import RocmFacts, major_minor
from tunedeck.hostcheck.rocm_support import (
    RocmSupport,
    arch_of_hsa_version,
    hsa_version_of,
    rocm_support,
    sibling_arch,
)


@dataclass
class RocmVerdict:
    """What the ROCm checks found: figures for the report, failures and warnings with their advice."""

    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)


def check_rocm_stack(
    hardware: HardwareProfile, config: TrainingConfig, support: RocmSupport | None = None
) -> RocmVerdict | None:
    """The ROCm part of check 1; None where torch is not a ROCm build (a CUDA, Apple or CPU-only machine)."""
    facts = hardware.rocm
    if facts is None:
        return None
    table = support or rocm_support()
    verdict = RocmVerdict(summary=_summary(facts), figures=_figures(facts, table))
    if hardware.backend != "rocm":
        _no_gpu(facts, verdict)
        return verdict
    release = _table_release(facts)
    _torch_build(hardware, facts, table, verdict)
    _architectures(facts, release, table, verdict)
    _operating_system(facts, release, table, verdict)
    _options(config, facts, verdict)
    return verdict


def _summary(facts: RocmFacts) -> str:
    system = major_minor(facts.system_rocm) or "not found"
    hip = facts.system_hip or facts.torch_hip or "unknown"
    archs = ", ".join(dict.fromkeys(facts.gfx_archs)) or "no GPU architecture found"
    return f"ROCm {system} (torch built for ROCm {facts.torch_rocm}, HIP {hip}) on {archs}, {facts.os_label}"


def _figures(facts: RocmFacts, table: RocmSupport) -> dict[str, Any]:
    return {
        "rocm_os": facts.os_name or facts.os_id,
        "rocm_os_id": facts.os_id,
        "rocm_os_version": facts.os_version,
        "rocm_kernel": facts.kernel,
        "rocm_gfx_archs": list(facts.gfx_archs),
        "rocm_system_version": facts.system_rocm,
        "rocm_system_version_source": facts.system_rocm_source,
        "rocm_system_hip": facts.system_hip,
        "rocm_torch_build": facts.torch_rocm,
        "rocm_torch_hip": facts.torch_hip,
        "rocm_torch_archs": list(facts.torch_archs),
        "rocm_hsa_override_gfx_version": facts.hsa_override_gfx_version,
        "rocm_kernels": {
            name: {"usable": probe.usable, "version": probe.version, "detail": probe.detail}
            for name, probe in (
                ("bitsandbytes", facts.bitsandbytes),
                ("flash_attn", facts.flash_attn),
                ("triton", facts.triton),
                ("fused_adamw", facts.fused_adamw),
            )
        },
        "rocm_support_table": {"sources": list(table.sources), "reviewed": table.reviewed},
    }


def _no_gpu(facts: RocmFacts, verdict: RocmVerdict) -> None:
    """torch is a ROCm build but sees no GPU: the driver or ROCm is missing, or the user cannot reach the GPU."""
    if not facts.kfd_present:
        why = "the ROCm kernel driver is not loaded (no /dev/kfd)"
    elif facts.system_rocm is None:
        why = "ROCm is not installed (no ROCm version file, no hipconfig)"
    else:
        why = "/dev/kfd exists, so this user may lack access to it (the render and video groups)"
    seen = f"; rocminfo lists {', '.join(facts.gfx_archs)}" if facts.gfx_archs else ""
    verdict.failures.append(f"torch is a ROCm {facts.torch_rocm} build but sees no AMD GPU: {why}{seen}")
    verdict.advice.append(
        f"install ROCm {facts.torch_rocm} (the amdgpu driver and runtime) and add this user to the render and "
        "video groups, or install torch's CPU build to train on the CPU"
    )


def _table_release(facts: RocmFacts) -> str | None:
    """The ROCm release whose support list applies: the installed one, else the one torch bundles."""
    return major_minor(facts.system_rocm) or facts.torch_rocm


def _torch_build(hardware: HardwareProfile, facts: RocmFacts, table: RocmSupport, verdict: RocmVerdict) -> None:
    torch_release = major_minor(hardware.torch_version) or ""
    torch_pin = re.split(r"[+]", hardware.torch_version)[0]
    builds = table.rocm_builds_of(torch_release)
    if builds is None:
        verdict.warnings.append(f"the ROCm support table has no entry for torch {torch_release}: not compared")
    elif facts.torch_rocm not in builds:
        verdict.warnings.append(
            f"torch {torch_pin} is published for ROCm {', '.join(builds)}, but this one was built for ROCm "
            f"{facts.torch_rocm}: a custom build the table cannot vouch for"
        )
    system = major_minor(facts.system_rocm)
    if system is None:
        verdict.warnings.append(
            "no system ROCm found: torch runs on the ROCm runtime it bundles, but libraries built against a "
            "system ROCm (bitsandbytes, flash-attention) will not load"
        )
        verdict.advice.append(f"install ROCm {facts.torch_rocm} to use those libraries")
        return
    if system == facts.torch_rocm:
        return
    verdict.failures.append(
        f"torch was built for ROCm {facts.torch_rocm} but this machine has ROCm {system} "
        f"(read from {facts.system_rocm_source})"
    )
    if builds is not None and system in builds:
        verdict.advice.append(
            f"install torch=={torch_pin} from the ROCm {system} wheel index, or upgrade ROCm to {facts.torch_rocm}"
        )
    else:
        published = f" (torch {torch_pin} is published for ROCm {', '.join(builds)})" if builds else ""
        verdict.advice.append(f"upgrade ROCm to {facts.torch_rocm}{published}")


def _architectures(facts: RocmFacts, release: str | None, table: RocmSupport, verdict: RocmVerdict) -> None:
    supported = table.archs_of(release or "")
    if supported is None:
        verdict.warnings.append(f"the ROCm support table does not list ROCm {release}: architectures not compared")
        return
    override = facts.hsa_override_gfx_version
    presented = arch_of_hsa_version(override) if override else None
    if override and presented is None:
        verdict.failures.append(f"HSA_OVERRIDE_GFX_VERSION={override} is not a version such as 10.3.0")
        verdict.advice.append("unset HSA_OVERRIDE_GFX_VERSION, or set it to the version of a supported architecture")
        return
    for arch in dict.fromkeys(facts.gfx_archs):
        runs_as = presented or arch
        if runs_as not in supported:
            verdict.failures.append(
                f"{runs_as} is not in ROCm {release}'s supported architectures ({', '.join(supported)})"
            )
            verdict.advice.append(_unsupported_arch_fix(arch, supported))
        elif facts.torch_archs and runs_as not in facts.torch_archs:
            verdict.failures.append(
                f"torch's kernels were not compiled for {runs_as} (it has {', '.join(facts.torch_archs)})"
            )
            verdict.advice.append(f"install a torch build for ROCm {release} that includes {runs_as}")
        elif presented and presented != arch:
            verdict.warnings.append(
                f"HSA_OVERRIDE_GFX_VERSION={override} runs {presented}'s kernels on this {arch}: AMD does not "
                "support this, and a kernel may fail or give wrong results"
            )


def _unsupported_arch_fix(arch: str, supported: tuple[str, ...]) -> str:
    sibling = sibling_arch(arch, supported)
    if sibling is None:
        return f"train on a GPU whose architecture is in the list ({arch} has no supported sibling to stand in for)"
    return (
        f"set HSA_OVERRIDE_GFX_VERSION={hsa_version_of(sibling)} only if this {arch} is of {sibling}'s generation "
        f"(it then runs {sibling}'s kernels, which AMD does not support on it); otherwise train on a listed GPU"
    )


def _operating_system(facts: RocmFacts, release: str | None, table: RocmSupport, verdict: RocmVerdict) -> None:
    # A warning, not a failure: ROCm often runs on distributions AMD does not test (Fedora, Arch),
    # and a failure here would refuse setups that train correctly.
    if release is None or table.archs_of(release) is None or table.os_supported(release, facts.os_id, facts.os_version):
        return
    verdict.warnings.append(
        f"{facts.os_label} is not among ROCm {release}'s supported operating systems ({table.os_summary(release)})"
    )
    verdict.advice.append("if kernels fail to load or the GPU hangs, move to a listed distribution and version")


def _options(config: TrainingConfig, facts: RocmFacts, verdict: RocmVerdict) -> None:
    """torch.compile needs triton with a backend for this GPU; flash-attention's fallback is noted."""
    if config.torch_compile and not facts.triton.usable:
        verdict.failures.append(
            f"torch_compile: true needs triton's ROCm kernels, which this stack lacks ({facts.triton.detail})"
        )
        verdict.advice.append("set torch_compile: false (the run is the same, without compiled kernels)")
    if config.attn_implementation == "auto" and not facts.flash_attn.usable:
        verdict.figures["rocm_attention_note"] = f"flash-attention does not run here ({facts.flash_attn.detail}): sdpa"
    if config.optim == "adamw" and not facts.fused_adamw.usable:
        verdict.figures["rocm_optimizer_note"] = (
            f"fused AdamW did not run here ({facts.fused_adamw.detail}): the unfused AdamW (same updates)"
        )
