"""Jobs across several machines on an existing Ray cluster, seen from the worker.

A worker started with `--ray-address` runs each job whose config asks for more than one
machine through the Ray driver, `python -m tunedeck.engine.ray_launch`, a process like the
engine child (the worker never imports torch or Ray Train). This module builds that command,
reads what the cluster offers (through `python -m tunedeck.engine.ray_cluster`, so Ray stays
out of the worker's process too), and turns a job's `devices`, `processes` and `machines`
into Ray Train workers.

Ray Train places one worker per device (GPU), or per process on the CPU, and packs them onto
as few nodes as hold them: on nodes alike (the usual cluster), `machines` × the devices of one
machine lands as the config says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunedeck.config.distribution import Placement
from tunedeck.core.errors import TunedeckError
from tunedeck.worker.engine_process import EngineProcessError, EngineRefusedError, run_engine_module, scratch_folder

# Joining a cluster takes a few seconds; one that has not answered in this long is not usable.
PROBE_TIMEOUT_S = 90.0


class RayClusterError(TunedeckError):
    """The Ray cluster cannot be used: Ray is not installed, or nobody answers at the address."""


class RayPlanError(TunedeckError):
    """A job across machines that this worker's Ray cluster cannot hold (or a worker without one)."""


@dataclass(frozen=True)
class RayNode:
    """One alive node of the cluster."""

    node_id: str
    address: str
    cpus: int
    gpus: int


@dataclass(frozen=True)
class RayPlan:
    """How one job runs on the cluster: Ray Train workers, on GPUs or not, laid out as machines × per machine."""

    workers: int
    use_gpu: bool
    machines: int
    per_machine: int


@dataclass(frozen=True)
class RayCluster:
    """What the Ray cluster at `address` offers, as read when the worker started."""

    address: str
    nodes: tuple[RayNode, ...]

    @classmethod
    def probe(
        cls, address: str, scratch_root: Path, *, timeout_s: float = PROBE_TIMEOUT_S, env: dict[str, str] | None = None
    ) -> RayCluster:
        """Read the cluster's nodes through the engine's `ray_cluster` process; a RayClusterError when unusable."""
        with scratch_folder(scratch_root, "ray-probe-") as folder:
            try:
                answer = run_engine_module(
                    "ray_cluster", {"address": address}, folder, timeout_s=timeout_s, env=env
                )  # fmt: skip
            except EngineRefusedError as error:
                raise RayClusterError(error.title) from None
            except EngineProcessError as error:
                raise RayClusterError(f"could not read the Ray cluster at {address}: {error}") from None
        return cls.from_answer(address, answer)

    @classmethod
    def from_answer(cls, address: str, answer: Mapping[str, Any]) -> RayCluster:
        """From the JSON the engine's `ray_cluster` process prints."""
        nodes = tuple(
            RayNode(
                node_id=str(node.get("node_id", "")),
                address=str(node.get("address", "")),
                cpus=int(node.get("cpus") or 0),
                gpus=int(node.get("gpus") or 0),
            )
            for node in answer.get("nodes") or []
        )
        return cls(address=address, nodes=nodes)

    @property
    def machines(self) -> int:
        """Alive nodes."""
        return len(self.nodes)

    @property
    def gpus(self) -> int:
        """GPUs on all nodes together."""
        return sum(node.gpus for node in self.nodes)

    @property
    def gpus_per_machine(self) -> int:
        """The most GPUs one node has: the most a job may ask on each machine."""
        return max((node.gpus for node in self.nodes), default=0)

    @property
    def cpus(self) -> int:
        """CPUs on all nodes together."""
        return sum(node.cpus for node in self.nodes)

    def describe(self) -> str:
        """One line for the worker's start message."""
        return f"Ray cluster at {self.address}: {self.machines} node(s), {self.gpus} GPU(s), {self.cpus} CPU(s)"

    def plan(self, config: Mapping[str, Any]) -> RayPlan | None:
        """The Ray Train workers for a job's config (`devices`, `processes`, `machines`), or None when it cannot fit.

        `devices` "auto" is one GPU per machine on a cluster with GPUs, else the CPU;
        `processes` "auto" is one per device, one on the CPU.
        """
        machines = int(config.get("machines") or 1)
        devices = config.get("devices", "auto")
        if devices == "auto":
            devices = 1 if self.gpus else 0
        processes = config.get("processes", "auto")
        per_machine = int(devices) if devices else (1 if processes == "auto" else int(processes))
        use_gpu = bool(devices)
        if use_gpu:
            holders = [node for node in self.nodes if node.gpus >= per_machine]
        else:
            holders = [node for node in self.nodes if node.cpus >= per_machine]
        if len(holders) < machines:
            return None
        return RayPlan(workers=machines * per_machine, use_gpu=use_gpu, machines=machines, per_machine=per_machine)


def runs_on_ray(cluster: RayCluster | None, placement: Placement, free_devices: int) -> bool:
    """Whether a claimed job goes to the Ray cluster rather than this machine.

    A job across machines always does; on a worker in front of a cluster, so does a job that
    needs more devices than this machine has free, when one node of the cluster holds them.
    """
    if placement.machines > 1:
        return True
    return cluster is not None and free_devices < placement.devices <= cluster.gpus_per_machine


def plan_for(cluster: RayCluster | None, config: Mapping[str, Any]) -> RayPlan:
    """The Ray Train workers of a job across machines on `cluster`; a RayPlanError saying why it cannot run there."""
    machines = int(config.get("machines") or 1)
    if cluster is None:
        raise RayPlanError(f"the job spans {machines} machines and this worker has no Ray cluster (--ray-address)")
    plan = cluster.plan(config)
    if plan is None:
        devices = config.get("devices", "auto")
        asked = f"{devices} GPU(s)" if isinstance(devices, int) and devices > 0 else "its processes"
        raise RayPlanError(
            f"the {cluster.describe()} cannot hold this job: it needs {machines} machines with {asked} each; "
            "lower machines or devices, or add nodes to the cluster and resume the job"
        )
    return plan
