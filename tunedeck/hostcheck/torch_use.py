"""After install: a machine with an NVIDIA or AMD GPU whose installed torch cannot use it is an error, with its fix.

`tunedeck env` and check 1 before training ask this. A CPU-only torch on a GPU machine, or a
CUDA build under a driver too old for it, would otherwise train on the CPU for hours.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunedeck.hostcheck.gpus import GpuFact, version_tuple

REINSTALL_FIX = "`make clean install` in the tunedeck folder (the host check then installs the build for this GPU)"


@dataclass(frozen=True)
class InstalledTorch:
    """What torch says of itself: its version, the CUDA or HIP it was built for, and whether it reaches a GPU."""

    version: str
    cuda: str | None  # torch.version.cuda
    hip: str | None  # torch.version.hip
    gpu_usable: bool  # torch.cuda.is_available()


def unusable_gpu_problem(gpus: list[GpuFact], torch: InstalledTorch, visible: dict[str, str]) -> str | None:
    """Why torch cannot use this machine's NVIDIA or AMD GPUs, with the fix; None when it can or none are there.

    `visible` holds CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES where set: GPUs hidden
    on purpose (an empty value or -1) are not a problem.
    """
    if torch.gpu_usable:
        return None
    nvidia = [gpu for gpu in gpus if gpu.vendor == "nvidia"]
    amd = [gpu for gpu in gpus if gpu.vendor == "amd"]
    if nvidia and not _hidden(visible.get("CUDA_VISIBLE_DEVICES")):
        return _nvidia_problem(nvidia, torch)
    if amd and not any(_hidden(visible.get(name)) for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")):
        return _amd_problem(amd, torch)
    return None


def _nvidia_problem(gpus: list[GpuFact], torch: InstalledTorch) -> str:
    found = f"this machine has {len(gpus)} NVIDIA GPU{'s' if len(gpus) > 1 else ''} ({gpus[0].model})"
    if torch.cuda is None:
        build = "a ROCm build" if torch.hip else "a CPU-only build"
        return f"{found} but the installed torch {torch.version} is {build}: it cannot use them. Fix: {REINSTALL_FIX}"
    driver = gpus[0]
    if driver.cuda_max and version_tuple(driver.cuda_max) < version_tuple(torch.cuda):
        return (
            f"{found} but torch {torch.version} is built for CUDA {torch.cuda} and driver {driver.driver} runs CUDA "
            f"up to {driver.cuda_max}. Fix: update the NVIDIA driver (then reboot), or {REINSTALL_FIX}"
        )
    return (
        f"{found} but torch {torch.version} (CUDA {torch.cuda}) sees none: check that `nvidia-smi` works in this "
        "shell and that CUDA_VISIBLE_DEVICES names them"
    )


def _amd_problem(gpus: list[GpuFact], torch: InstalledTorch) -> str:
    found = f"this machine has {len(gpus)} AMD GPU{'s' if len(gpus) > 1 else ''} ({gpus[0].model})"
    if torch.hip is None:
        build = "a CUDA build" if torch.cuda else "a CPU-only build"
        return (
            f"{found} but the installed torch {torch.version} is {build}: it cannot use them. "
            f"Fix: `TORCH_VARIANT=rocm make clean install` in the tunedeck folder"
        )
    return (
        f"{found} but torch {torch.version} (ROCm/HIP {torch.hip}) sees none: check that your user can open "
        "/dev/kfd and /dev/dri (the render and video groups) and that ROCm's `rocminfo` lists the GPU"
    )


def _hidden(value: str | None) -> bool:
    return value is not None and value.strip() in ("", "-1")
