"""The GPUs a machine has, read from the vendors' tools rather than from torch (which may not be installed yet).

NVIDIA: `nvidia-smi` (model, memory, driver, the newest CUDA the driver runs, compute
capability). AMD: `amd-smi`, else `rocminfo` (model, memory, gfx architecture) and ROCm's
version file. Apple: `system_profiler` and `sysctl` (chip, unified memory). Each parser is a
pure function of the tool's output, so a test can describe any machine.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tunedeck.hostcheck.commands import CommandRunner, rocm_root

_NVIDIA_FIELDS_OLD = "index,name,memory.total,driver_version"
_NVIDIA_FIELDS = f"{_NVIDIA_FIELDS_OLD},compute_cap"


@dataclass(frozen=True)
class GpuFact:
    """One GPU as its vendor's tool describes it; fields a vendor does not have stay None."""

    vendor: str  # "nvidia", "amd" or "apple"
    model: str
    memory_mib: int | None = None  # unified memory on Apple silicon
    driver: str | None = None
    cuda_max: str | None = None  # NVIDIA: the newest CUDA the driver runs ("13.0")
    compute_capability: str | None = None  # NVIDIA: "9.0"
    gfx: str | None = None  # AMD: the LLVM target ("gfx942")

    def describe(self) -> str:
        """One line for people: model, memory, driver and what the device runs."""
        parts = [self.model]
        if self.memory_mib:
            parts.append(f"{self.memory_mib / 1024:.0f} GiB")
        if self.driver:
            parts.append(f"driver {self.driver}")
        if self.cuda_max:
            parts.append(f"CUDA ≤ {self.cuda_max}")
        if self.compute_capability:
            parts.append(f"compute capability {self.compute_capability}")
        if self.gfx:
            parts.append(self.gfx)
        return ", ".join(parts)


def nvidia_gpus(run: CommandRunner) -> list[GpuFact]:
    """Every NVIDIA GPU `nvidia-smi` lists; [] when the tool or the driver is missing."""
    table = run(["nvidia-smi", f"--query-gpu={_NVIDIA_FIELDS}", "--format=csv,noheader,nounits"])
    if table is None:  # drivers before 510 know no compute_cap field
        table = run(["nvidia-smi", f"--query-gpu={_NVIDIA_FIELDS_OLD}", "--format=csv,noheader,nounits"])
    if not table:
        return []
    cuda_max = parse_nvidia_cuda_max(run(["nvidia-smi"]) or "")
    return [gpu for gpu in (parse_nvidia_row(line, cuda_max) for line in table.splitlines()) if gpu is not None]


def parse_nvidia_row(line: str, cuda_max: str | None) -> GpuFact | None:
    """One line of `nvidia-smi --query-gpu=index,name,memory.total,driver_version[,compute_cap]`."""
    cells = [cell.strip() for cell in line.split(",")]
    if len(cells) < 4 or not cells[1]:
        return None
    return GpuFact(
        vendor="nvidia",
        model=cells[1],
        memory_mib=_int(cells[2]),
        driver=cells[3] or None,
        cuda_max=cuda_max,
        compute_capability=cells[4] if len(cells) > 4 and re.fullmatch(r"\d+\.\d+", cells[4]) else None,
    )


def parse_nvidia_cuda_max(banner: str) -> str | None:
    """The "CUDA Version: 13.0" of `nvidia-smi`'s banner: the newest CUDA runtime this driver can run."""
    found = re.search(r"CUDA Version:\s*(\d+\.\d+)", banner)
    return found.group(1) if found else None


def amd_gpus(run: CommandRunner) -> list[GpuFact]:
    """Every AMD GPU ROCm's tools list (`amd-smi`, else `rocminfo`); [] without ROCm."""
    listed = parse_amd_smi(run(["amd-smi", "static", "--asic", "--vram", "--driver", "--json"]) or "")
    return listed or parse_rocminfo(run(["rocminfo"]) or "")


def parse_amd_smi(text: str) -> list[GpuFact]:
    """`amd-smi static --asic --vram --driver --json`: a list of GPUs (or {"gpu_data": [...]} in newer releases)."""
    try:
        document: Any = json.loads(text) if text.strip() else []
    except ValueError:
        return []
    entries = document.get("gpu_data", []) if isinstance(document, dict) else document
    gpus = []
    for entry in entries if isinstance(entries, list) else []:
        asic = entry.get("asic") or {}
        gfx = str(asic.get("target_graphics_version") or "").split(":")[0] or None
        size = (entry.get("vram") or {}).get("size")
        memory = _int(size.get("value")) if isinstance(size, dict) else _int(size)
        driver = (entry.get("driver") or {}).get("version")
        gpus.append(GpuFact("amd", str(asic.get("market_name") or gfx or "AMD GPU"), memory, driver, gfx=gfx))
    return gpus


def parse_rocminfo(text: str) -> list[GpuFact]:
    """GPU agents of `rocminfo`: each agent's "Name: gfx…" and "Marketing Name" (CPU agents skipped)."""
    gpus = []
    for agent in re.split(r"\n\s*Agent \d+\s*\n", text)[1:]:
        arch = re.search(r"^\s*Name:\s*(gfx[0-9a-f]+)\b", agent, flags=re.MULTILINE)
        if not arch:
            continue
        marketing = re.search(r"^\s*Marketing Name:\s*(.+?)\s*$", agent, flags=re.MULTILINE)
        gpus.append(GpuFact("amd", marketing.group(1) if marketing else arch.group(1), gfx=arch.group(1)))
    return gpus


def rocminfo_archs(text: str) -> tuple[str, ...]:
    """The distinct gfx architectures of `rocminfo`'s GPU agents, in their order."""
    return tuple(dict.fromkeys(gpu.gfx for gpu in parse_rocminfo(text) if gpu.gfx))


def system_rocm_version(run: CommandRunner) -> tuple[str | None, str | None]:
    """The installed ROCm release and where it was read: ROCm's version file, else `hipconfig --version`."""
    version_file = rocm_root() / ".info" / "version"
    try:
        text = version_file.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    if text:
        return text.split("-", 1)[0], str(version_file)
    output = (run(["hipconfig", "--version"]) or "").strip()
    if output:
        # HIP is versioned with ROCm: HIP 7.1.x ships in ROCm 7.1.
        return major_minor(output.splitlines()[-1].strip()), "hipconfig --version"
    return None, None


def apple_gpus(run: CommandRunner, machine: str) -> list[GpuFact]:
    """The Apple silicon GPU (`system_profiler`), with the unified memory it shares; [] on an Intel Mac."""
    if machine != "arm64":
        return []
    chip = parse_system_profiler(run(["system_profiler", "SPDisplaysDataType", "-json"]) or "")
    memory = _int((run(["sysctl", "-n", "hw.memsize"]) or "").strip())
    return [GpuFact("apple", chip or "Apple silicon GPU", memory // 2**20 if memory else None)]


def parse_system_profiler(text: str) -> str | None:
    """The chip's name ("Apple M2 Pro") from `system_profiler SPDisplaysDataType -json`."""
    try:
        displays = json.loads(text).get("SPDisplaysDataType") or []
    except (ValueError, AttributeError):
        return None
    return next((str(d.get("sppci_model")) for d in displays if isinstance(d, dict) and d.get("sppci_model")), None)


def discrete_gpus(run: CommandRunner) -> list[GpuFact]:
    """The NVIDIA and AMD GPUs of this machine, whatever torch can see of them."""
    return [*nvidia_gpus(run), *amd_gpus(run)]


def version_tuple(text: str) -> tuple[int, ...]:
    """(13, 0) of "13.0", (580, 65, 6) of "580.65.06": versions compared part by part."""
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def major_minor(version: str | None) -> str | None:
    """ "7.1" of "7.1.52802-26aae437f6": the release a version belongs to."""
    found = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{found.group(1)}.{found.group(2)}" if found else None


def _int(text: Any) -> int | None:
    try:
        return int(float(str(text).strip()))
    except (TypeError, ValueError):
        return None
