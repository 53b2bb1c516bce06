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
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunedeck.engine.host.rocm_probes import KernelProbe, probe_kernels

_COMMAND_TIMEOUT_S = 15.0  # rocminfo can take seconds on a machine with many GPUs


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


def major_minor(version: str | None) -> str | None:
    """ "7.1" of "7.1.25424-abc" or "7.1.0-120"; None when there is no version."""
    if not version:
        return None
    found = re.match(r"\s*(\d+)\.(\d+)", version)
    return f"{found.group(1)}.{found.group(2)}" if found else None


def base_arch(name: str) -> str:
    """The architecture without its feature flags: "gfx90a" of "gfx90a:sramecc+:xnack-"."""
    return name.split(":", 1)[0].strip()


def detect_rocm_facts(torch: Any, device_count: int) -> RocmFacts:
    """Describe the AMD stack: OS, architectures, system ROCm/HIP, torch's build, and kernel probes.

    `device_count` is how many GPUs torch sees (0 when the driver is missing); the kernel
    probes need one, and are reported as not run otherwise.
    """
    os_release = _os_release()
    system_rocm, source = _system_rocm_version()
    archs = _torch_archs(torch, device_count) or _rocminfo_archs()
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


def _rocm_root() -> Path:
    return Path(os.environ.get("ROCM_PATH") or "/opt/rocm")


def _system_rocm_version() -> tuple[str | None, str | None]:
    """The installed ROCm release and where it was read: ROCm's version file, else hipconfig's HIP version."""
    version_file = _rocm_root() / ".info" / "version"
    try:
        text = version_file.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    if text:
        return text.split("-", 1)[0], str(version_file)
    hip = _hipconfig_version()
    if hip:
        # HIP is versioned with ROCm: HIP 7.1.x ships in ROCm 7.1.
        return major_minor(hip), "hipconfig --version"
    return None, None


def _hipconfig_version() -> str | None:
    hipconfig = shutil.which("hipconfig") or _existing(_rocm_root() / "bin" / "hipconfig")
    output = _run([hipconfig, "--version"]) if hipconfig else None
    return output.strip().splitlines()[-1].strip() if output and output.strip() else None


def _rocminfo_archs() -> tuple[str, ...]:
    """GPU agents' architectures from `rocminfo` (when torch sees no GPU, this says what is there)."""
    rocminfo = shutil.which("rocminfo") or _existing(_rocm_root() / "bin" / "rocminfo")
    output = _run([rocminfo]) if rocminfo else None
    if not output:
        return ()
    return tuple(dict.fromkeys(re.findall(r"^\s*Name:\s*(gfx[0-9a-f]+)\b", output, flags=re.MULTILINE)))


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


def _existing(path: Path) -> str | None:
    return str(path) if path.is_file() else None


def _run(command: list[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
