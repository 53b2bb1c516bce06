"""Check 9: all-reduce bandwidth and latency between the run's processes, against what the link should give.

Unlike the other checks this one needs every process of the run: the multi-process launcher calls
`check_interconnect` on all ranks once the process group is up, and appends the result to
the report with `PreflightReport.add_check`. Every rank gets the same result, so they all
take the same decision. A one-process run has nothing to measure and the check is skipped
(a skip that fails nothing; see `CHECKS_THAT_MAY_NOT_APPLY`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tunedeck.engine.distributed.interconnect import (
    DEFAULT_ITERATIONS,
    DEFAULT_WARMUP,
    expected_bus_bandwidth_gbps,
    judge,
    measure_all_reduce,
)
from tunedeck.engine.distributed.ranks import Ranks
from tunedeck.engine.preflight.report import CheckResult

if TYPE_CHECKING:
    import torch

INTERCONNECT_CHECK = 9


def check_interconnect(
    ranks: Ranks,
    device: torch.device,
    *,
    sizes_bytes: Sequence[int] | None = None,
    iterations: int = DEFAULT_ITERATIONS,
    warmup: int = DEFAULT_WARMUP,
) -> CheckResult:
    """Measure and judge the all-reduce between the run's processes; every rank calls it, after `init_process_group`.

    The keyword arguments go to `measure_all_reduce` (defaults: 8 and 64 MiB on CUDA, 1 and
    4 MiB on the CPU, 10 timed iterations after 3 warm-up ones). A failed collective raises:
    the process group is unusable afterwards, so the launcher stops the run.
    """
    began = time.monotonic()
    if not ranks.distributed:
        return CheckResult(INTERCONNECT_CHECK, "skip", "one process: nothing to measure", {"world_size": 1})
    measure = measure_all_reduce(ranks, device, sizes_bytes=sizes_bytes, iterations=iterations, warmup=warmup)
    expected = expected_bus_bandwidth_gbps(measure.backend, measure.link)
    status, message, advice = judge(measure, expected)
    figures = {
        "backend": measure.backend,
        "link": measure.link,
        "world_size": measure.world_size,
        "machines": measure.machines,
        "latency_us": round(measure.latency_us, 1),
        "algbw_gbps": round(measure.algbw_gbps, 3),
        "busbw_gbps": round(measure.busbw_gbps, 3),
        "expected_busbw_gbps": expected,
        "sizes": [point.to_dict() for point in measure.points],
        "iterations": measure.iterations,
    }
    return CheckResult(INTERCONNECT_CHECK, status, message, figures, advice, seconds=time.monotonic() - began)
