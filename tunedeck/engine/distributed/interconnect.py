"""How fast the run's processes exchange gradients: all-reduce latency and bandwidth, against the link's figure.

Every rank calls `measure_all_reduce` on the initialised process group (NCCL on CUDA, gloo
on the CPU). A one-element message gives the latency; messages of a few MiB (CPU) to 64 MiB
(GPU) give the bandwidth, reported as nccl-tests does: algorithm bandwidth (bytes / time)
and bus bandwidth (algbw × 2(n−1)/n), the figure that compares across process counts
because it is what each link carries in a ring all-reduce.

Each iteration is timed on every rank, the slowest rank's time is taken (an all-reduce MAX),
and the median over iterations is reported, so every rank holds the same figures and takes
the same decision. `expected_bus_bandwidth_gbps` says what the link should reach, and
`judge` warns when the measure is far below it.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tunedeck.engine.distributed.ranks import Ranks

if TYPE_CHECKING:
    import torch

Link = Literal["nvlink", "peer", "pcie", "network", "loopback"]
Verdict = Literal["pass", "warn"]

# The latency message: one fp32 element, so the time is the collective's fixed cost alone.
LATENCY_BYTES = 4
# Bandwidth messages. On a GPU 64 MiB is where NVLink's bus bandwidth levels off in
# nccl-tests' all_reduce_perf; gloo on the CPU levels off at a few MiB, and larger messages
# would only make the check slow on a small machine.
GPU_SIZES_BYTES: tuple[int, ...] = (8 << 20, 64 << 20)
CPU_SIZES_BYTES: tuple[int, ...] = (1 << 20, 4 << 20)
DEFAULT_ITERATIONS = 10
DEFAULT_WARMUP = 3

# Warn below this share of the expected bus bandwidth: a healthy link measures 50–100 % of
# its figure depending on message size and load; a quarter means traffic took a slower path.
BANDWIDTH_WARN_FRACTION = 0.25
# One host: NCCL measures tens of µs and gloo a few hundred; a millisecond per collective
# means a busy CPU or a fall back to sockets, and it adds up over thousands of steps.
ONE_HOST_LATENCY_WARN_US = 1000.0

# Expected all-reduce bus bandwidth, GB/s (10^9 bytes/s, as nccl-tests counts). Each figure
# is a conservative floor for the link, not its peak, so a healthy machine never warns:
NETWORK_FLOOR_GBPS = 1.0  # 10 GbE carries 1.25 GB/s on the wire; a faster fabric is unknown here
EXPECTED_BUS_BANDWIDTH_GBPS: dict[tuple[str, Link], float] = {
    # nccl-tests all_reduce_perf on 8-GPU boards: H100/H200 NVLink 4 about 450 GB/s, A100
    # NVLink 3 about 230, V100 NVLink 2 about 130; a two-GPU bridge (A6000, 3090) about 50.
    # 200 keeps the older boards passing and still warns when an H100 board falls back to
    # PCIe (about 40 GB/s on gen5).
    ("nccl", "nvlink"): 200.0,
    # Peer-to-peer over PCIe: gen4 x16 measures about 20 GB/s, gen5 about 40; gen4's figure.
    ("nccl", "peer"): 20.0,
    # No peer access: NCCL copies through host shared memory, about half the P2P figure.
    ("nccl", "pcie"): 10.0,
    # Across machines the fabric is unknown (InfiniBand measures 20+ GB/s); the 10 GbE floor
    # still catches a run that went over a 1 GbE management network.
    ("nccl", "network"): NETWORK_FLOOR_GBPS,
    # gloo on one host goes through loopback TCP and memory copies: about 1 GB/s on a few cores.
    ("gloo", "loopback"): 1.0,
    ("gloo", "network"): NETWORK_FLOOR_GBPS,
}


@dataclass(frozen=True)
class BandwidthPoint:
    """One message size: its median time (slowest rank) and the bandwidths it gives."""

    size_bytes: int
    seconds: float
    algbw_gbps: float
    busbw_gbps: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "bytes": self.size_bytes,
            "median_us": round(self.seconds * 1e6, 1),
            "algbw_gbps": round(self.algbw_gbps, 3),
            "busbw_gbps": round(self.busbw_gbps, 3),
        }


@dataclass(frozen=True)
class InterconnectMeasure:
    """All-reduce figures between the run's processes; the same on every rank."""

    backend: str
    link: Link
    world_size: int
    machines: int
    latency_us: float
    points: tuple[BandwidthPoint, ...]
    iterations: int

    @property
    def best(self) -> BandwidthPoint:
        """The size with the highest bus bandwidth: what the link sustains."""
        return max(self.points, key=lambda point: point.busbw_gbps)

    @property
    def algbw_gbps(self) -> float:
        """Algorithm bandwidth at the best size (bytes reduced per second)."""
        return self.best.algbw_gbps

    @property
    def busbw_gbps(self) -> float:
        """Bus bandwidth at the best size (what each link carries)."""
        return self.best.busbw_gbps

    @property
    def sizes_bytes(self) -> tuple[int, ...]:
        """The bandwidth message sizes."""
        return tuple(point.size_bytes for point in self.points)


def algorithm_bandwidth_gbps(size_bytes: int, seconds: float) -> float:
    """Bytes reduced per second, in GB/s (10^9 bytes/s)."""
    if seconds <= 0:
        raise ValueError(f"an all-reduce cannot take {seconds} s")
    return size_bytes / seconds / 1e9


def bus_bandwidth_gbps(algbw_gbps: float, world_size: int) -> float:
    """All-reduce bus bandwidth: algbw × 2(n−1)/n, what each link carries in a ring (nccl-tests' busbw)."""
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, not {world_size}")
    return algbw_gbps * 2 * (world_size - 1) / world_size


def detect_link(backend: str, ranks: Ranks, *, peer_access: bool | None, nvlink: bool | None) -> Link:
    """The link the all-reduce crosses, from facts gathered elsewhere (a pure function).

    Processes on several machines meet over the network whatever the backend; gloo on one
    machine goes through loopback; NCCL on one machine goes over NVLink when the GPUs have
    active NVLinks and peer access, over PCIe peer-to-peer with peer access alone, and
    through host memory without it. Unknown facts (`None`) take the slower link, so the
    expected figure stays conservative.
    """
    if ranks.world_size > ranks.local_world_size:
        return "network"
    if backend != "nccl":
        return "loopback"
    if peer_access:
        return "nvlink" if nvlink else "peer"
    return "pcie"


def expected_bus_bandwidth_gbps(backend: str, link: Link) -> float:
    """A conservative all-reduce bus bandwidth (GB/s) for the backend over the link; the network floor when unknown."""
    return EXPECTED_BUS_BANDWIDTH_GBPS.get((backend, link), NETWORK_FLOOR_GBPS)


def judge(measure: InterconnectMeasure, expected_gbps: float) -> tuple[Verdict, str, list[str]]:
    """`warn` when the bus bandwidth is under a quarter of `expected_gbps` or one host's latency over 1 ms.

    Returns the status, a message naming the measured and expected figures and the link,
    and advice for what to check when it warns.
    """
    where = (
        f"{measure.world_size} processes on {measure.machines} machines"
        if measure.machines > 1
        else f"{measure.world_size} processes on one machine"
    )
    figures = (
        f"bus bandwidth {measure.busbw_gbps:.3g} GB/s (algorithm {measure.algbw_gbps:.3g} GB/s), "
        f"latency {measure.latency_us:.0f} µs"
    )
    problems: list[str] = []
    advice: list[str] = []
    if measure.busbw_gbps < BANDWIDTH_WARN_FRACTION * expected_gbps:
        share = measure.busbw_gbps / expected_gbps
        problems.append(
            f"bus bandwidth {measure.busbw_gbps:.3g} GB/s is {share:.0%} of the {expected_gbps:.3g} GB/s "
            f"expected over {measure.link} ({measure.backend})"
        )
        advice.extend(_bandwidth_advice(measure))
    if measure.machines == 1 and measure.latency_us > ONE_HOST_LATENCY_WARN_US:
        problems.append(
            f"latency {measure.latency_us:.0f} µs is over the {ONE_HOST_LATENCY_WARN_US:.0f} µs "
            "a collective should take on one machine"
        )
        advice.append(
            "Slow collectives on one machine come from busy CPU cores or another job on these devices: "
            "stop it, or run fewer processes."
        )
    if not problems:
        return (
            "pass",
            f"all-reduce over {measure.link} ({measure.backend}, {where}): {figures}; the link's figure is "
            f"{expected_gbps:.3g} GB/s, warning under {BANDWIDTH_WARN_FRACTION * expected_gbps:.3g}",
            [],
        )
    if measure.backend == "nccl":
        advice.append("NCCL_DEBUG=INFO in the run's environment shows which transport NCCL chose (P2P, SHM or NET).")
    return "warn", f"all-reduce ({where}): " + "; ".join(problems), advice


def _bandwidth_advice(measure: InterconnectMeasure) -> list[str]:
    if measure.link == "nvlink":
        return [
            "Check the NVLinks with `nvidia-smi nvlink --status` and `nvidia-smi topo -m` (the GPUs should be "
            "joined by NV# links); a two-GPU bridge measures about 50 GB/s, which this expectation does not cover.",
            "Make sure NCCL_P2P_DISABLE and NCCL_SHM_DISABLE are not set in the run's environment.",
        ]
    if measure.link == "peer":
        return [
            "Make sure NCCL_P2P_DISABLE is not set, and that the GPUs sit in x16 slots "
            "(`nvidia-smi -q | grep -A2 'Link Width'`).",
            "`nvidia-smi topo -m` shows the path between the GPUs: SYS (across CPU sockets) is the slowest.",
        ]
    if measure.link == "pcie":
        return [
            "No peer-to-peer access was seen between these GPUs (or each process sees only its own GPU), so traffic "
            "may go through host memory: check the IOMMU/ACS settings (`nvidia-smi topo -p2p r`) or choose GPUs "
            "under one PCIe switch.",
            "Make sure NCCL_P2P_DISABLE is not set in the run's environment.",
        ]
    if measure.link == "network":
        interface = "NCCL_SOCKET_IFNAME" if measure.backend == "nccl" else "GLOO_SOCKET_IFNAME"
        return [
            f"Set {interface} to the fast network interface between the machines, not the management network.",
            "With InfiniBand or RoCE, make sure NCCL_IB_DISABLE is not set and the HCAs are up (`ibstat`).",
            "Use fewer machines: one machine with more devices keeps the traffic off the network.",
        ]
    return [
        "gloo on one machine shares the CPU cores with the training: run fewer processes, or train on a GPU.",
    ]


def measure_all_reduce(
    ranks: Ranks,
    device: torch.device,
    *,
    sizes_bytes: Sequence[int] | None = None,
    iterations: int = DEFAULT_ITERATIONS,
    warmup: int = DEFAULT_WARMUP,
    latency_bytes: int = LATENCY_BYTES,
    link: Link | None = None,
) -> InterconnectMeasure:
    """All-reduce latency and bandwidth on the initialised process group; every rank calls it and gets the same figures.

    `device` is this rank's device: CUDA tensors for NCCL, CPU tensors otherwise (gloo has
    no MPS or XPU path). Sizes are rounded down to whole fp32 elements; by default 8 and 64
    MiB on CUDA, 1 and 4 MiB elsewhere. `link` replaces detection.
    """
    import torch
    import torch.distributed as dist

    if not ranks.distributed:
        raise ValueError("one process: there is no all-reduce to measure")
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("measure_all_reduce needs the run's process group: call init_process_group first")
    if iterations < 1 or warmup < 0:
        raise ValueError(f"iterations must be at least 1 and warmup at least 0, not {iterations} and {warmup}")
    on = device if device.type == "cuda" else torch.device("cpu")
    default_sizes = GPU_SIZES_BYTES if on.type == "cuda" else CPU_SIZES_BYTES
    sizes = tuple(sizes_bytes) if sizes_bytes is not None else default_sizes
    if not sizes or min(sizes) < 4 or latency_bytes < 4:
        raise ValueError(f"message sizes must be at least one fp32 element (4 bytes), not {sizes} / {latency_bytes}")
    backend = backend_of(str(dist.get_backend()), on.type)
    if link is None:
        link = _agreed_link(backend, ranks, on)
    elements = [latency_bytes // 4, *(size // 4 for size in sizes)]
    local = torch.tensor(
        [_time_all_reduce(count, on, iterations, warmup) for count in elements], dtype=torch.float64, device=on
    )
    # Each iteration counts as long as its slowest rank took; after this every rank holds the same times.
    dist.all_reduce(local, op=dist.ReduceOp.MAX)
    medians = [statistics.median(row) for row in local.cpu().tolist()]
    points = []
    for count, seconds in zip(elements[1:], medians[1:], strict=True):
        algbw = algorithm_bandwidth_gbps(count * 4, seconds)
        points.append(BandwidthPoint(count * 4, seconds, algbw, bus_bandwidth_gbps(algbw, ranks.world_size)))
    return InterconnectMeasure(
        backend=backend,
        link=link,
        world_size=ranks.world_size,
        machines=ranks.machines,
        latency_us=medians[0] * 1e6,
        points=tuple(points),
        iterations=iterations,
    )


def backend_of(group_backend: str, device_type: str) -> str:
    """The backend these tensors use: `dist.get_backend()` names one, or one per device (`cpu:gloo,cuda:nccl`)."""
    if ":" not in group_backend:
        return group_backend
    by_device = dict(part.split(":", 1) for part in group_backend.split(",") if ":" in part)
    return by_device.get(device_type, group_backend)


def _time_all_reduce(elements: int, device: torch.device, iterations: int, warmup: int) -> list[float]:
    """Seconds of each timed all-reduce of `elements` fp32 values on this rank."""
    import torch
    import torch.distributed as dist

    # Zeros: a sum of zeros never overflows however many iterations run, and costs what any values cost.
    tensor = torch.zeros(elements, dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    _synchronize(device)
    times = []
    for _ in range(iterations):
        started = time.perf_counter()
        dist.all_reduce(tensor)
        _synchronize(device)  # NCCL returns once the kernel is queued; the time is the kernel's
        # A timer tick of 0 would make an infinite bandwidth: count at least a nanosecond.
        times.append(max(time.perf_counter() - started, 1e-9))
    return times


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def _agreed_link(backend: str, ranks: Ranks, device: torch.device) -> Link:
    """Detect the link with facts every rank agrees on: peer access and NVLink only count when all ranks see them."""
    if backend != "nccl" or ranks.world_size > ranks.local_world_size:
        return detect_link(backend, ranks, peer_access=None, nvlink=None)
    import torch
    import torch.distributed as dist

    peer_access, nvlink = probe_local_gpus(ranks.local_world_size)
    facts = torch.tensor([int(bool(peer_access)), int(bool(nvlink))], dtype=torch.int32, device=device)
    dist.all_reduce(facts, op=dist.ReduceOp.MIN)
    agreed_peer, agreed_nvlink = (bool(value) for value in facts.tolist())
    return detect_link(backend, ranks, peer_access=agreed_peer, nvlink=agreed_nvlink)


def probe_local_gpus(local_world_size: int) -> tuple[bool | None, bool | None]:
    """(peer access between every pair of this machine's run GPUs, NVLink active on each); None when unknown.

    Unknown when CUDA is absent or this process sees fewer GPUs than the machine runs
    (a launcher that gives each process one GPU hides the others from it).
    """
    import torch

    if not torch.cuda.is_available():
        return None, None
    count = torch.cuda.device_count()
    if count < max(2, local_world_size):
        return None, None
    indices = range(local_world_size)
    peer = all(torch.cuda.can_device_access_peer(a, b) for a in indices for b in indices if a != b)
    return peer, nvlink_active([cuda_pci_bus_id(index) for index in indices])


def nvlink_active(pci_bus_ids: Sequence[str | None], nvml: Any = None) -> bool | None:
    """Whether each GPU (by PCI bus id) has at least one active NVLink; None when NVML cannot tell.

    `nvml` is the `pynvml` module (a stand-in in tests). AMD GPUs and machines without NVML
    answer None, which `detect_link` treats as no NVLink.
    """
    if not pci_bus_ids or any(bus_id is None for bus_id in pci_bus_ids):
        return None
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return None
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception:  # no driver, or not an NVIDIA GPU: NVML cannot tell
        return None
    try:
        for bus_id in pci_bus_ids:
            handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
            if not any(_link_up(nvml, handle, link) for link in range(nvml.NVML_NVLINK_MAX_LINKS)):
                return False
        return True
    except Exception:  # a device NVML does not know (ROCm, a mismatched bus id): unknown, not absent
        return None
    finally:
        with contextlib.suppress(Exception):  # shutting down is best effort; the answer is already known
            nvml.nvmlShutdown()


def _link_up(nvml: Any, handle: Any, link: int) -> bool:
    try:
        return bool(nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED)
    except Exception:  # NVML raises NotSupported for link slots the GPU lacks
        return False


def cuda_pci_bus_id(index: int) -> str | None:
    """NVML's `domain:bus:device.function` for a CUDA device, None when unknown (CUDA and NVML number GPUs apart)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    domain, bus, device = (getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id"))
    if domain is None or bus is None or device is None:
        return None
    return f"{domain:08x}:{bus:02x}:{device:02x}.0"
