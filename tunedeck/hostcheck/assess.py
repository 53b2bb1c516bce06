"""The host check's verdict: which torch variant to install, why, and each problem with its fix.

A blocking problem stops the install before any download; a warning is printed and the install
goes on. Every problem is one line of what is wrong and one line of what to do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tunedeck.hostcheck.gpus import GpuFact, major_minor, version_tuple
from tunedeck.hostcheck.host import HostFacts
from tunedeck.hostcheck.install_needs import TorchBuildNeeds, disk_needed_gb
from tunedeck.hostcheck.locks import CUDA_LOCK
from tunedeck.hostcheck.rocm_support import rocm_support, sibling_arch

VARIANTS = ("cpu", "cuda", "rocm", "apple")


@dataclass(frozen=True)
class Problem:
    """Something about the machine the install cannot go past (`blocking`) or should say (a warning)."""

    blocking: bool
    what: str
    fix: str


@dataclass(frozen=True)
class InstallPlan:
    """The variant chosen, why, and how pip installs it; `problems` say what stands in the way."""

    variant: str
    reason: str
    torch_index_url: str | None = None  # an extra wheel index for torch (ROCm, or one the user named)
    lock_args: tuple[str, ...] = ()  # what pip adds to `-r requirements.lock`
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        """Whether a problem stops the install."""
        return any(problem.blocking for problem in self.problems)


@dataclass(frozen=True)
class Wanted:
    """What the user asked for and what the repository pins."""

    needs: TorchBuildNeeds
    python_range: tuple[tuple[int, int], tuple[int, int]]
    variant: str | None = None  # TORCH_VARIANT
    index_url: str | None = None  # TORCH_INDEX_URL


def assess(facts: HostFacts, wanted: Wanted) -> InstallPlan:
    """Choose the variant and list every problem, platform first, then Python, disk and GPUs."""
    if wanted.variant is not None and wanted.variant not in VARIANTS:
        problem = Problem(True, f"TORCH_VARIANT={wanted.variant} is not a variant", f"use one of {', '.join(VARIANTS)}")
        return InstallPlan("cpu", "no variant could be chosen", problems=[problem])
    variant, reason = _choose_variant(facts, wanted.variant)
    problems = _platform_problems(facts, wanted.needs, variant) + _python_problems(facts, wanted.python_range)
    notes: list[str] = []
    # "cpu" names torch's own CPU-only wheel index (its address is in install_needs.json).
    index_url = wanted.needs.cpu_index if wanted.index_url == "cpu" else wanted.index_url
    if variant == "cuda":
        problems += _nvidia_problems(facts, wanted.needs)
    elif variant == "rocm":
        rocm_index, rocm_problems = _rocm_choice(facts, wanted.needs)
        problems += rocm_problems
        index_url = index_url or rocm_index
    elif variant == "cpu" and facts.system == "Linux" and index_url is None:
        notes.append(
            f"the registry's torch {wanted.needs.version} for Linux carries CUDA libraries (about 3 GB to download); "
            "`TORCH_INDEX_URL=cpu make install` installs torch's CPU-only build instead"
        )
    disk_variant = "cpu-only" if variant == "cpu" and index_url == wanted.needs.cpu_index else variant
    problems += _disk_problems(facts, disk_variant)
    if index_url and wanted.index_url in (None, "cpu"):
        notes.append(f"torch comes from {index_url}")
    return InstallPlan(variant, reason, index_url, _lock_args(facts, variant), problems, notes)


def _choose_variant(facts: HostFacts, forced: str | None) -> tuple[str, str]:
    if forced is not None:
        return forced, f"TORCH_VARIANT={forced} was given"
    if facts.system == "Darwin":
        if facts.machine == "arm64":
            return "apple", "macOS on Apple silicon: the registry's torch runs on its GPU through MPS"
        return "cpu", "macOS on an Intel processor"
    if facts.gpus_of("nvidia"):
        count = len(facts.gpus_of("nvidia"))
        return "cuda", f"{count} NVIDIA GPU{'s' if count > 1 else ''} found by nvidia-smi"
    if facts.gpus_of("amd"):
        count = len(facts.gpus_of("amd"))
        return "rocm", f"{count} AMD GPU{'s' if count > 1 else ''} found by ROCm's tools"
    return "cpu", "no NVIDIA or AMD GPU found (neither nvidia-smi nor ROCm's tools list one)"


def _lock_args(facts: HostFacts, variant: str) -> tuple[str, ...]:
    if variant == "cuda":
        return ("-r", CUDA_LOCK)  # bitsandbytes and the CUDA libraries, pinned
    if variant == "cpu" and facts.system == "Linux":
        return ("-c", CUDA_LOCK)  # the registry's Linux torch pulls CUDA libraries: pinned all the same
    return ()


def _platform_problems(facts: HostFacts, needs: TorchBuildNeeds, variant: str) -> list[Problem]:
    if facts.system == "Windows":
        return [
            Problem(
                True,
                "tunedeck runs on Linux and macOS, not on Windows itself",
                "install WSL 2 with Ubuntu 24.04 or 22.04 and run `make run` inside it",
            )
        ]
    if facts.system not in ("Linux", "Darwin"):
        return [Problem(True, f"{facts.system} is not supported", "use Linux (x86_64 or aarch64) or macOS")]
    if facts.system == "Darwin":
        if facts.machine != "arm64":
            return [
                Problem(
                    True,
                    f"torch {needs.version} publishes no build for Intel Macs",
                    "use a Mac with Apple silicon, or a Linux machine",
                )
            ]
        if variant in ("cuda", "rocm"):
            return [Problem(True, f"TORCH_VARIANT={variant} cannot run on macOS", "leave TORCH_VARIANT unset")]
        return []
    return _libc_problems(facts, needs)


def _libc_problems(facts: HostFacts, needs: TorchBuildNeeds) -> list[Problem]:
    if facts.libc is None or facts.libc[0] != "glibc":
        return [
            Problem(
                True,
                "this Linux has no GNU C library (Alpine and other musl systems)",
                f"use a glibc distribution (glibc {needs.glibc_min} or newer: Ubuntu 20.04+, Debian 11+)",
            )
        ]
    if version_tuple(facts.libc[1]) < version_tuple(needs.glibc_min):
        return [
            Problem(
                True,
                f"glibc {facts.libc[1]} is older than the {needs.glibc_min} torch's wheels need",
                "use a newer distribution (Ubuntu 20.04+, Debian 11+, RHEL 8+)",
            )
        ]
    return []


def _python_problems(facts: HostFacts, python_range: tuple[tuple[int, int], tuple[int, int]]) -> list[Problem]:
    low, high = python_range
    have = ".".join(map(str, facts.python))
    problems = []
    if not low <= facts.python[:2] < high:
        wanted = f"{low[0]}.{low[1]}" if (high[0], high[1] - 1) == low else f">={low[0]}.{low[1]},<{high[0]}.{high[1]}"
        name = f"python{low[0]}.{low[1]}"
        problems.append(
            Problem(
                True,
                f"Python {have} ({facts.python_executable}) is not the Python {wanted} tunedeck is tested with",
                f"install {name} (Ubuntu 22.04/Debian: `sudo apt install {name} {name}-venv`; Ubuntu 24.04, whose "
                f"archive has none: from a PPA that builds it; macOS: `brew install {name}`), "
                f"then `make run PYTHON={name}`",
            )
        )
    elif not facts.has_venv:
        name = f"python{facts.python[0]}.{facts.python[1]}"
        problems.append(
            Problem(
                True,
                f"{name} has no venv module with ensurepip, so no virtualenv can be made",
                f"`sudo apt install {name}-venv` (Debian and Ubuntu ship it apart)",
            )
        )
    return problems


def _disk_problems(facts: HostFacts, variant: str) -> list[Problem]:
    needed = disk_needed_gb(variant)
    free = facts.free_disk_bytes / 1e9
    if free >= needed:
        return []
    return [
        Problem(
            True,
            f"{free:.1f} GB free at {facts.disk_path}; the {variant} install needs about {needed} GB",
            "free disk there, or put the virtualenv on a larger disk: `make run VENV=/larger/disk/venv`",
        )
    ]


def _nvidia_problems(facts: HostFacts, needs: TorchBuildNeeds) -> list[Problem]:
    gpus = facts.gpus_of("nvidia")
    if not gpus:
        # Only a forced variant gets here: building an image on a machine without its GPU is legitimate.
        return [
            Problem(
                False,
                "no NVIDIA GPU found: nvidia-smi is missing or lists none",
                "install the NVIDIA driver (it brings nvidia-smi); the CUDA build is installed all the same",
            )
        ]
    problems = []
    for gpu in gpus:
        problems += _driver_problems(gpu, needs) + _capability_problems(gpu, needs)
    return problems


def _driver_problems(gpu: GpuFact, needs: TorchBuildNeeds) -> list[Problem]:
    """The driver must run the CUDA the registry's torch is built for (its newest CUDA, as nvidia-smi says)."""
    driver_package = f"nvidia-driver-{needs.cuda_min_driver_linux.split('.')[0]}"
    if gpu.cuda_max is None:
        what = f"{gpu.model}: the driver did not say which CUDA it runs"
        return [Problem(False, what, f"torch {needs.version} needs {needs.cuda_min_driver_linux} or newer")]
    if version_tuple(gpu.cuda_max) >= version_tuple(needs.registry_cuda):
        return []
    what = (
        f"{gpu.model}: driver {gpu.driver} runs CUDA up to {gpu.cuda_max}, "
        f"but torch {needs.version} from the registry is built for CUDA {needs.registry_cuda}"
    )
    fix = (
        f"update the NVIDIA driver to {needs.cuda_min_driver_linux} or newer (Ubuntu: `sudo apt install "
        f"{driver_package}`, then reboot), or rent a machine with a newer driver; TORCH_VARIANT=cpu installs "
        "without the GPU"
    )
    return [Problem(True, what, fix)]


def _capability_problems(gpu: GpuFact, needs: TorchBuildNeeds) -> list[Problem]:
    capability = gpu.compute_capability
    if not capability or version_tuple(capability) >= version_tuple(needs.cuda_min_compute_capability):
        return []
    what = (
        f"{gpu.model} has compute capability {capability}; CUDA {needs.registry_cuda} builds run on "
        f"{needs.cuda_min_compute_capability} and newer"
    )
    return [
        Problem(True, what, "use a newer GPU (T4, A10, L4, A100, H100, RTX 20 series and later), or TORCH_VARIANT=cpu")
    ]


def _rocm_choice(facts: HostFacts, needs: TorchBuildNeeds) -> tuple[str | None, list[Problem]]:
    """The ROCm wheel index for this machine's ROCm, and what stands in the way."""
    table = rocm_support()
    builds = table.rocm_builds_of(needs.release) or ()
    if not builds:
        return None, [
            Problem(
                True,
                f"no ROCm build of torch {needs.release} is listed",
                "add it to tunedeck/hostcheck/rocm_support.json",
            )
        ]
    system = major_minor(facts.system_rocm)
    problems: list[Problem] = []
    if system is None:
        build = builds[-1]
        problems.append(
            Problem(
                False,
                "ROCm is not installed system-wide (no /opt/rocm/.info/version)",
                f"install ROCm {build} from AMD's repository before training",
            )
        )
    elif system in builds:
        build = system
    else:
        build = builds[-1]
        problems.append(
            Problem(
                True,
                f"this machine has ROCm {system}; torch {needs.version} is published for ROCm {', '.join(builds)}",
                f"install ROCm {build}, or TORCH_VARIANT=cpu",
            )
        )
    archs = table.archs_of(build) or ()
    for gpu in facts.gpus_of("amd"):
        if gpu.gfx and gpu.gfx not in archs:
            sibling = sibling_arch(gpu.gfx, archs)
            fix = f"try HSA_OVERRIDE_GFX_VERSION for {sibling} (same generation)" if sibling else "use a listed GPU"
            problems.append(
                Problem(
                    True,
                    f"{gpu.model} ({gpu.gfx}) is not among ROCm {build}'s GPUs ({', '.join(archs)})",
                    f"{fix}, or TORCH_VARIANT=cpu",
                )
            )
    return needs.rocm_index.format(rocm=build), problems
