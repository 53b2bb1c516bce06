"""The interconnect's arithmetic and decisions: bus bandwidth, the link, its expected figure, the verdict."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tunedeck.engine.distributed.interconnect import (
    BandwidthPoint,
    InterconnectMeasure,
    Link,
    algorithm_bandwidth_gbps,
    backend_of,
    bus_bandwidth_gbps,
    detect_link,
    expected_bus_bandwidth_gbps,
    judge,
    nvlink_active,
)
from tunedeck.engine.distributed.ranks import Ranks

ONE_MACHINE_OF_8 = Ranks(rank=3, local_rank=3, world_size=8, local_world_size=8)
TWO_MACHINES_OF_8 = Ranks(rank=9, local_rank=1, world_size=16, local_world_size=8)


def _measure(
    busbw: float,
    *,
    link: Link = "nvlink",
    backend: str = "nccl",
    world_size: int = 8,
    machines: int = 1,
    latency_us: float = 30.0,
) -> InterconnectMeasure:
    algbw = busbw * world_size / (2 * (world_size - 1))
    point = BandwidthPoint(64 << 20, (64 << 20) / (algbw * 1e9), algbw, busbw)
    return InterconnectMeasure(backend, link, world_size, machines, latency_us, (point,), iterations=10)


def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n() -> None:
    assert bus_bandwidth_gbps(10.0, 2) == pytest.approx(10.0)  # two ranks: each link carries the message once
    assert bus_bandwidth_gbps(10.0, 8) == pytest.approx(17.5)
    assert bus_bandwidth_gbps(10.0, 1) == 0.0
    assert algorithm_bandwidth_gbps(1_000_000_000, 0.5) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        algorithm_bandwidth_gbps(1024, 0.0)
    with pytest.raises(ValueError):
        bus_bandwidth_gbps(1.0, 0)


def test_the_measure_reports_its_best_size() -> None:
    small = BandwidthPoint(1 << 20, 1e-3, 1.05, 1.8)
    large = BandwidthPoint(64 << 20, 5e-3, 13.4, 23.5)
    measure = InterconnectMeasure("nccl", "peer", 8, 1, 40.0, (small, large), iterations=10)
    assert (measure.busbw_gbps, measure.algbw_gbps) == (23.5, 13.4)
    assert measure.sizes_bytes == (1 << 20, 64 << 20)


@pytest.mark.parametrize(
    ("backend", "ranks", "peer_access", "nvlink", "link"),
    [
        ("nccl", ONE_MACHINE_OF_8, True, True, "nvlink"),
        ("nccl", ONE_MACHINE_OF_8, True, False, "peer"),
        ("nccl", ONE_MACHINE_OF_8, True, None, "peer"),  # NVML could not tell: the slower link's figure
        ("nccl", ONE_MACHINE_OF_8, False, True, "pcie"),
        ("nccl", ONE_MACHINE_OF_8, None, None, "pcie"),  # each process sees only its own GPU
        ("nccl", TWO_MACHINES_OF_8, True, True, "network"),
        ("gloo", Ranks(0, 0, 2, 2), None, None, "loopback"),
        ("gloo", Ranks(0, 0, 4, 2), None, None, "network"),
    ],
)
def test_the_link_follows_machines_backend_and_peer_access(
    backend: str, ranks: Ranks, peer_access: bool | None, nvlink: bool | None, link: Link
) -> None:
    assert detect_link(backend, ranks, peer_access=peer_access, nvlink=nvlink) == link


def test_expected_bandwidth_orders_the_links_and_falls_back_to_the_network_floor() -> None:
    links: tuple[Link, ...] = ("nvlink", "peer", "pcie", "network")
    nvlink, peer, pcie, network = (expected_bus_bandwidth_gbps("nccl", link) for link in links)
    assert nvlink > peer > pcie > network > 0
    assert expected_bus_bandwidth_gbps("gloo", "loopback") == pytest.approx(1.0)
    assert expected_bus_bandwidth_gbps("gloo", "network") == pytest.approx(1.0)
    assert expected_bus_bandwidth_gbps("mpi", "nvlink") == pytest.approx(1.0)
    # Conservative: an A100 board (about 230 GB/s) must not warn, an H100 board fallen back to PCIe gen5 must.
    assert 40.0 < 0.25 * nvlink <= 230.0


def test_a_healthy_link_passes_and_names_its_figures() -> None:
    status, message, advice = judge(_measure(380.0), 200.0)
    assert status == "pass" and advice == []
    assert "380 GB/s" in message and "200 GB/s" in message and "nvlink" in message


def test_nvlink_far_below_its_figure_warns_with_both_figures_and_what_to_check() -> None:
    status, message, advice = judge(_measure(18.0), 200.0)
    assert status == "warn"
    assert "18 GB/s" in message and "200 GB/s" in message and "nvlink" in message and "9%" in message
    text = " ".join(advice)
    assert "nvidia-smi nvlink" in text and "NCCL_P2P_DISABLE" in text and "NCCL_DEBUG=INFO" in text


def test_the_warning_starts_under_a_quarter_of_the_figure() -> None:
    assert judge(_measure(5.1, link="peer"), 20.0)[0] == "pass"
    assert judge(_measure(4.9, link="peer"), 20.0)[0] == "warn"


def test_a_slow_network_warns_with_the_interface_and_fewer_machines() -> None:
    status, message, advice = judge(_measure(0.11, link="network", world_size=16, machines=2), 1.0)
    assert status == "warn" and "16 processes on 2 machines" in message and "network" in message
    text = " ".join(advice)
    assert "NCCL_SOCKET_IFNAME" in text and "fewer machines" in text
    gloo = judge(_measure(0.11, link="network", backend="gloo", world_size=4, machines=2), 1.0)
    assert "GLOO_SOCKET_IFNAME" in " ".join(gloo[2]) and "NCCL_DEBUG" not in " ".join(gloo[2])


def test_latency_over_a_millisecond_warns_on_one_machine_only() -> None:
    slow = _measure(0.9, link="loopback", backend="gloo", world_size=2, latency_us=2500.0)
    status, message, advice = judge(slow, 1.0)
    assert status == "warn" and "2500 µs" in message and "1000 µs" in message
    assert any("fewer processes" in line for line in advice)
    across = _measure(5.0, link="network", world_size=16, machines=2, latency_us=2500.0)
    assert judge(across, 1.0)[0] == "pass"


class _FakeNvml:
    """NVML for two GPUs: links are up on the GPUs named in `linked`."""

    NVML_NVLINK_MAX_LINKS = 4
    NVML_FEATURE_ENABLED = 1

    def __init__(self, linked: set[str], *, init_fails: bool = False) -> None:
        self.linked = linked
        self.init_fails = init_fails
        self.shut_down = False

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> Any:
        if bus_id not in {"00000000:1b:00.0", "00000000:43:00.0"}:
            raise RuntimeError("NVML_ERROR_NOT_FOUND")
        return SimpleNamespace(bus_id=bus_id)

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        if link >= 2:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")  # slots the GPU lacks
        return 1 if handle.bus_id in self.linked and link == 1 else 0


def test_nvlink_needs_an_active_link_on_every_gpu_and_is_unknown_when_nvml_cannot_tell() -> None:
    both = ["00000000:1b:00.0", "00000000:43:00.0"]
    nvml = _FakeNvml(set(both))
    assert nvlink_active(both, nvml) is True and nvml.shut_down
    assert nvlink_active(both, _FakeNvml({both[0]})) is False
    assert nvlink_active([*both, "00000000:99:00.0"], _FakeNvml(set(both))) is None
    assert nvlink_active(both, _FakeNvml(set(both), init_fails=True)) is None
    assert nvlink_active([both[0], None], _FakeNvml(set(both))) is None


def test_the_backend_is_the_one_for_the_tensors_device() -> None:
    assert backend_of("nccl", "cuda") == "nccl"
    assert backend_of("cpu:gloo,cuda:nccl", "cuda") == "nccl"
    assert backend_of("cpu:gloo,cuda:nccl", "cpu") == "gloo"
