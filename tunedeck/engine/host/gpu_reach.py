"""Whether the installed torch reaches the machine's NVIDIA or AMD GPUs: `tunedeck env` and check 1 fail when not.

The GPUs are read from the vendors' tools (`nvidia-smi`, ROCm's), so a CPU-only torch on a GPU
machine, which sees no GPU at all, is caught with the command that installs the right build.
"""

from __future__ import annotations

import os

from tunedeck.hostcheck.commands import run_tool
from tunedeck.hostcheck.gpus import discrete_gpus
from tunedeck.hostcheck.torch_use import InstalledTorch, unusable_gpu_problem

# CUDA's and ROCm's own variables: an empty value or -1 hides every GPU on purpose.
_VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def installed_torch() -> InstalledTorch:
    """The installed torch: version, the CUDA or HIP it was built for, and whether it reaches a GPU."""
    import torch

    return InstalledTorch(
        version=str(torch.__version__),
        cuda=torch.version.cuda,
        hip=getattr(torch.version, "hip", None),
        gpu_usable=bool(torch.cuda.is_available()),
    )


def torch_gpu_problem() -> str | None:
    """Why the installed torch cannot use this machine's NVIDIA or AMD GPUs, with the fix; None when it can."""
    torch = installed_torch()
    if torch.gpu_usable:
        return None  # no need to run the vendors' tools
    visible = {name: os.environ[name] for name in _VISIBILITY_VARIABLES if name in os.environ}
    return unusable_gpu_problem(discrete_gpus(run_tool), torch, visible)
