"""After install: GPUs the installed torch cannot use are an error with the fix; GPUs hidden on purpose are not."""

from __future__ import annotations

from tests.unit.hostcheck.machines import amd_smi, nvidia_smi, runner
from tunedeck.hostcheck.gpus import discrete_gpus
from tunedeck.hostcheck.torch_use import InstalledTorch, unusable_gpu_problem

H100S = discrete_gpus(runner(nvidia_smi("580.95.05", "13.0")))
OLD_DRIVER = discrete_gpus(runner(nvidia_smi("550.54.15", "12.4")))
MI300X = discrete_gpus(runner(amd_smi("gfx942")))
CPU_TORCH = InstalledTorch("2.13.0+cpu", None, None, gpu_usable=False)
CUDA_TORCH = InstalledTorch("2.13.0", "13.0", None, gpu_usable=False)


def test_a_cpu_only_torch_on_an_nvidia_machine_names_the_reinstall() -> None:
    problem = unusable_gpu_problem(H100S, CPU_TORCH, {})
    assert problem is not None
    assert "2 NVIDIA GPUs (NVIDIA H100 80GB HBM3)" in problem and "2.13.0+cpu is a CPU-only build" in problem
    assert "make clean install" in problem


def test_a_cuda_build_under_a_driver_too_old_for_it_names_the_driver_update() -> None:
    problem = unusable_gpu_problem(OLD_DRIVER, CUDA_TORCH, {})
    assert problem is not None and "built for CUDA 13.0 and driver 550.54.15 runs CUDA up to 12.4" in problem


def test_a_cuda_build_on_an_amd_machine_names_the_rocm_variant() -> None:
    problem = unusable_gpu_problem(MI300X, CUDA_TORCH, {})
    assert problem is not None and "is a CUDA build" in problem and "TORCH_VARIANT=rocm make clean install" in problem


def test_no_problem_when_torch_reaches_the_gpu_or_there_is_none_or_they_are_hidden_on_purpose() -> None:
    assert unusable_gpu_problem(H100S, InstalledTorch("2.13.0", "13.0", None, gpu_usable=True), {}) is None
    assert unusable_gpu_problem([], CPU_TORCH, {}) is None
    assert unusable_gpu_problem(H100S, CPU_TORCH, {"CUDA_VISIBLE_DEVICES": ""}) is None
    assert unusable_gpu_problem(MI300X, CPU_TORCH, {"HIP_VISIBLE_DEVICES": "-1"}) is None
    assert unusable_gpu_problem(H100S, CPU_TORCH, {"CUDA_VISIBLE_DEVICES": "0"}) is not None
