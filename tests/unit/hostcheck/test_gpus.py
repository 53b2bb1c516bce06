"""The vendors' tools parsed: what each GPU is, its memory, driver, CUDA or gfx architecture."""

from __future__ import annotations

from tests.unit.hostcheck.machines import amd_smi, nvidia_smi, runner
from tunedeck.hostcheck.gpus import (
    GpuFact,
    discrete_gpus,
    parse_amd_smi,
    parse_nvidia_cuda_max,
    parse_rocminfo,
    parse_system_profiler,
    rocminfo_archs,
)

ROCMINFO = """
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Marketing Name:          AMD EPYC 9654 96-Core Processor
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx942
  Marketing Name:          AMD Instinct MI300X
  Device Type:             GPU
*******
Agent 3
*******
  Name:                    gfx942
  Marketing Name:          AMD Instinct MI300X
  Device Type:             GPU
"""


def test_nvidia_smi_gives_model_memory_driver_cuda_and_capability() -> None:
    gpus = discrete_gpus(runner(nvidia_smi("580.95.05", "13.0")))
    assert gpus == [
        GpuFact("nvidia", "NVIDIA H100 80GB HBM3", 81559, "580.95.05", "13.0", "9.0"),
        GpuFact("nvidia", "NVIDIA H100 80GB HBM3", 81559, "580.95.05", "13.0", "9.0"),
    ]
    assert gpus[0].describe() == "NVIDIA H100 80GB HBM3, 80 GiB, driver 580.95.05, CUDA ≤ 13.0, compute capability 9.0"


def test_an_old_driver_without_the_compute_capability_field_is_still_read() -> None:
    old = {
        ("nvidia-smi", "--query-gpu=index,name,memory.total,driver_version"): "0, Tesla T4, 15360, 470.57.02\n",
        ("nvidia-smi",): "| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |",
    }
    assert discrete_gpus(runner(old)) == [GpuFact("nvidia", "Tesla T4", 15360, "470.57.02", "11.4", None)]


def test_no_tool_means_no_gpu() -> None:
    assert discrete_gpus(runner({})) == []
    assert parse_nvidia_cuda_max("NVIDIA-SMI has failed because it couldn't communicate with the driver") is None


def test_amd_smi_in_both_of_its_shapes_and_rocminfo_as_the_fallback() -> None:
    assert discrete_gpus(runner(amd_smi("gfx942"))) == [
        GpuFact("amd", "AMD Instinct MI300X", 196592, "6.10.5", gfx="gfx942")
    ]
    wrapped = '{"gpu_data": [{"asic": {"market_name": "Radeon PRO W7900", "target_graphics_version": "gfx1100"}}]}'
    assert [gpu.gfx for gpu in parse_amd_smi(wrapped)] == ["gfx1100"]
    assert parse_amd_smi("not json") == []
    assert [gpu.model for gpu in parse_rocminfo(ROCMINFO)] == ["AMD Instinct MI300X"] * 2
    assert rocminfo_archs(ROCMINFO) == ("gfx942",)
    assert discrete_gpus(runner({("rocminfo",): ROCMINFO}))[0].gfx == "gfx942"


def test_system_profiler_names_the_chip() -> None:
    assert parse_system_profiler('{"SPDisplaysDataType": [{"sppci_model": "Apple M3 Max"}]}') == "Apple M3 Max"
    assert parse_system_profiler("") is None
