"""The interconnect check on two real processes (gloo on the CPU): same figures on both, and a skip on one process."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tunedeck.engine.distributed.interconnect import measure_all_reduce
from tunedeck.engine.distributed.ranks import Ranks
from tunedeck.engine.preflight.interconnect import check_interconnect

WORLD_SIZE = 2


def _rank_main(rank: int, folder: str) -> None:
    """One process of the run: join through a file store, measure, check, write what it saw."""
    out = Path(folder)
    dist.init_process_group("gloo", init_method=f"file://{out / 'store'}", rank=rank, world_size=WORLD_SIZE)
    try:
        ranks = Ranks(rank=rank, local_rank=rank, world_size=WORLD_SIZE, local_world_size=WORLD_SIZE)
        # Small and few: two cores run both processes, and the figures only need to be real.
        cpu = torch.device("cpu")
        measure = measure_all_reduce(ranks, cpu, sizes_bytes=(256 << 10, 1 << 20), iterations=5, warmup=2)
        result = check_interconnect(ranks, cpu, sizes_bytes=(1 << 20,), iterations=5, warmup=2)
        seen: dict[str, Any] = {
            "measure": {
                "backend": measure.backend,
                "link": measure.link,
                "latency_us": measure.latency_us,
                "algbw_gbps": measure.algbw_gbps,
                "busbw_gbps": measure.busbw_gbps,
                "sizes_bytes": list(measure.sizes_bytes),
            },
            "check": result.to_dict(),
        }
        (out / f"rank{rank}.json").write_text(json.dumps(seen))
    finally:
        dist.destroy_process_group()


def test_two_processes_measure_the_same_positive_figures(tmp_path: Path) -> None:
    mp.spawn(_rank_main, args=(str(tmp_path),), nprocs=WORLD_SIZE, join=True)
    first, second = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE))
    measure = first["measure"]
    assert (measure["backend"], measure["link"], measure["sizes_bytes"]) == ("gloo", "loopback", [256 << 10, 1 << 20])
    for name in ("latency_us", "algbw_gbps", "busbw_gbps"):
        assert math.isfinite(measure[name]) and measure[name] > 0, name
    assert measure["busbw_gbps"] == measure["algbw_gbps"]  # two ranks: 2(n−1)/n is 1
    assert second["measure"] == measure  # the slowest rank's times, on every rank

    check = first["check"]
    assert (check["number"], check["name"]) == (9, "interconnect")
    assert check["status"] in ("pass", "warn")
    figures = check["figures"]
    assert (figures["backend"], figures["link"], figures["world_size"]) == ("gloo", "loopback", WORLD_SIZE)
    assert figures["expected_busbw_gbps"] > 0 and [size["bytes"] for size in figures["sizes"]] == [1 << 20]
    for name in ("latency_us", "algbw_gbps", "busbw_gbps"):
        assert math.isfinite(figures[name]) and figures[name] > 0, name
    # Every rank takes the same decision from the same figures; only the time each spent differs.
    del check["seconds"], second["check"]["seconds"]
    assert second["check"] == check


def test_one_process_has_nothing_to_measure() -> None:
    result = check_interconnect(Ranks(), torch.device("cpu"))
    assert (result.number, result.name, result.status) == (9, "interconnect", "skip")
    assert result.message == "one process: nothing to measure"
