"""What an AMD machine runs: operating system, GPU architectures, system ROCm and HIP, torch's ROCm build.

`RocmFacts` is plain data so tests can describe any AMD machine; `detect_rocm_facts` fills it
from the system (os-release, /opt/rocm, `rocminfo`, `hipconfig`) and from torch, and probes
the kernels that are CUDA-first elsewhere (`tunedeck.engine.host.rocm_probes`). The checks
before training compare these facts with the support table
(`tunedeck.engine.preflight.rocm_stack`); env.json records them with the hardware.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.engine.host.rocm_probes import KernelProbe, probe_kernels
from tunedeck.hostcheck.commands import run_tool
from tunedeck.hostcheck.gpus import major_minor, rocminfo_archs, system_rocm_version

__all__ = ["RocmFacts", "base_arch", "detect_rocm_facts", "major_minor"]


@dataclass(frozen=True)
class RocmFacts:
    """The AMD software stack a run would use."""

    os_id: str | None = None  # os-release ID: "ubuntu", "rhel", ...
    os_version: str | None = None  # os-release VERSION_ID: "24.04", "9.4", ...
    os_name: str | None = None  # PRETTY_NAME, for people
    kernel: str | None = None
    gfx_archs: tuple[str, ...] = ()  # one per visible device, without feature flags: "gfx942"
    torch_rocm: str | None = None  # the ROCm major.minor torch was built for
    torch_hip: str | None = None  # torch.version.hip
    torch_archs: tuple[str, ...] = ()  # the architectures torch's kernels were compiled for
    system_rocm: str | None = None  # the installed ROCm release, e.g. "7.1.0"
    system_rocm_source: str | None = None  # where that version was read
    system_hip: str | None = None  # `hipconfig --version`
    hsa_override_gfx_version: str | None = None  # HSA_OVERRIDE_GFX_VERSION, when set
    kfd_present: bool = False  # /dev/kfd: the ROCm kernel driver is loaded
    bitsandbytes: KernelProbe = field(default_factory=lambda: KernelProbe(False, detail="not probed"))
    flash_attn: KernelProbe = field(default_factory=lambda: KernelProbe(False, detail="not probed"))
    triton: KernelProbe = field(default_factory=lambda: KernelProbe(False, detail="not probed"))
    fused_adamw: KernelProbe = field(default_factory=lambda: KernelProbe(False, detail="not probed"))

    @property
    def os_label(self) -> str:
        """The operating system as people name it, with its kernel."""
        name = self.os_name or " ".join(part for part in (self.os_id, self.os_version) if part) or "unknown OS"
        return f"{name} (kernel {self.kernel})" if self.kernel else name


def base_arch(name: str) -> str:
    """The architecture without its feature flags: "gfx90a" of "gfx90a:sramecc+:xnack-"."""
    return name.split(":", 1)[0].strip()


def detect_rocm_facts(torch: Any, device_count: int) -> RocmFacts:
    """Describe the AMD stack: OS, architectures, system ROCm/HIP, torch's build, and kernel probes.

    `device_count` is how many GPUs torch sees (0 when the driver is missing); the kernel
    probes need one, and are reported as not run otherwise.
    """
    os_release = _os_release()
    system_rocm, source = system_rocm_version(run_tool)
    archs = _torch_archs(torch, device_count) or rocminfo_archs(run_tool(["rocminfo"]) or "")
    return RocmFacts(
        os_id=os_release.get("ID"),
        os_version=os_release.get("VERSION_ID"),
        os_name=os_release.get("PRETTY_NAME"),
        kernel=platform.release() or None,
        gfx_archs=archs,
        torch_rocm=_torch_rocm(torch),
        torch_hip=getattr(torch.version, "hip", None),
        torch_archs=_torch_compiled_archs(torch) if device_count else (),
        system_rocm=system_rocm,
        system_rocm_source=source,
        system_hip=_hipconfig_version(),
        hsa_override_gfx_version=os.environ.get("HSA_OVERRIDE_GFX_VERSION") or None,
        kfd_present=Path("/dev/kfd").exists(),
        **probe_kernels(torch, device_count),
    )


def _os_release() -> dict[str, str]:
    try:
        return dict(platform.freedesktop_os_release())
    except OSError:
        return {}


def _hipconfig_version() -> str | None:
    output = run_tool(["hipconfig", "--version"])
    return output.strip().splitlines()[-1].strip() if output and output.strip() else None


def _torch_archs(torch: Any, device_count: int) -> tuple[str, ...]:
    archs = []
    for index in range(device_count):
        name = getattr(torch.cuda.get_device_properties(index), "gcnArchName", "") or ""
        if name:
            archs.append(base_arch(name))
    return tuple(archs)


def _torch_compiled_archs(torch: Any) -> tuple[str, ...]:
    try:
        return tuple(arch for arch in (base_arch(a) for a in torch.cuda.get_arch_list()) if arch.startswith("gfx"))
    except (RuntimeError, AttributeError):
        return ()


def _torch_rocm(torch: Any) -> str | None:
    """The ROCm torch was built for: its wheel's "+rocm7.1" tag, else the major.minor of its HIP."""
    found = re.search(r"\+rocm(\d+\.\d+)", str(torch.__version__))
    return found.group(1) if found else major_minor(getattr(torch.version, "hip", None))

