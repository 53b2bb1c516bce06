"""The interconnect on GPUs: NVML finds a CUDA device by its PCI bus id, and NCCL between two GPUs measures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tunedeck.engine.distributed.interconnect import cuda_pci_bus_id, nvlink_active, probe_local_gpus
from tunedeck.engine.distributed.ranks import Ranks
from tunedeck.engine.preflight.interconnect import check_interconnect

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(getattr(torch.version, "hip", None) is not None, reason="NVML is NVIDIA's")
def test_nvml_answers_for_the_cuda_device_by_its_bus_id() -> None:
    bus_id = cuda_pci_bus_id(0)
    assert bus_id is not None
    # True or False: NVML found the device; None would mean the bus id did not match it.
    assert nvlink_active([bus_id]) in (True, False)
    if torch.cuda.device_count() == 1:
        assert probe_local_gpus(2) == (None, None)  # the second GPU is not visible: unknown


def _rank_main(rank: int, folder: str) -> None:
    out = Path(folder)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{out / 'store'}", rank=rank, world_size=2)
    try:
        ranks = Ranks(rank=rank, local_rank=rank, world_size=2, local_world_size=2)
        result = check_interconnect(ranks, torch.device("cuda", rank))
        document = result.to_dict()
        del document["seconds"]
        (out / f"rank{rank}.json").write_text(json.dumps(document))
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_gpus_measure_nccl_and_agree(tmp_path: Path) -> None:
    mp.spawn(_rank_main, args=(str(tmp_path),), nprocs=2, join=True)
    first, second = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2))
    assert first == second
    figures = first["figures"]
    assert first["status"] in ("pass", "warn") and figures["backend"] == "nccl"
    assert figures["link"] in ("nvlink", "peer", "pcie")
    assert [size["bytes"] for size in figures["sizes"]] == [8 << 20, 64 << 20]
    for name in ("latency_us", "algbw_gbps", "busbw_gbps"):
        assert math.isfinite(figures[name]) and figures[name] > 0, name
