"""The worker's side of jobs across machines: the Ray driver's command line and what the cluster offers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tunedeck.config.distribution import placement
from tunedeck.config.loading import validate_config
from tunedeck.core.errors import Issue
from tunedeck.core.launcher import ray_engine_command
from tunedeck.worker import ray_engine
from tunedeck.worker.engine_process import EngineRefusedError
from tunedeck.worker.ray_engine import RayCluster, RayClusterError, RayPlan, runs_on_ray

ANSWER = {
    "address": "head:6379",
    "nodes": [
        {"node_id": "a", "address": "10.0.0.1", "cpus": 32.0, "gpus": 4.0},
        {"node_id": "b", "address": "10.0.0.2", "cpus": 32.0, "gpus": 4.0},
        {"node_id": "c", "address": "10.0.0.3", "cpus": 8.0, "gpus": 0.0},
    ],
}


def test_the_driver_command_names_spec_outcome_address_and_workers(tmp_path: Path) -> None:
    spec, outcome = tmp_path / "spec.json", tmp_path / "outcome.json"
    command = ray_engine_command(spec, outcome, "head:6379", 8, use_gpu=True, max_failures=2)
    assert command[:3] == [sys.executable, "-m", "tunedeck.engine.ray_launch"]
    assert command[3:] == [
        "--spec", str(spec), "--outcome", str(outcome), "--address", "head:6379", "--workers", "8",
        "--use-gpu", "--max-failures", "2",
    ]  # fmt: skip
    cpu = ray_engine_command(spec, outcome, "auto", 2, use_gpu=False)
    assert "--use-gpu" not in cpu and "--max-failures" not in cpu


def test_the_cluster_says_what_it_offers() -> None:
    cluster = RayCluster.from_answer("head:6379", ANSWER)
    assert (cluster.machines, cluster.gpus, cluster.cpus) == (3, 8, 72)
    assert cluster.describe() == "Ray cluster at head:6379: 3 node(s), 8 GPU(s), 72 CPU(s)"


@pytest.mark.parametrize(
    ("config", "plan"),
    [
        ({"machines": 2, "devices": 4}, RayPlan(workers=8, use_gpu=True, machines=2, per_machine=4)),
        ({"machines": 2}, RayPlan(workers=2, use_gpu=True, machines=2, per_machine=1)),  # auto: a GPU a machine
        ({"machines": 3, "devices": 0, "processes": 2}, RayPlan(workers=6, use_gpu=False, machines=3, per_machine=2)),
        ({"machines": 3, "devices": 1}, None),  # only two nodes have GPUs
        ({"machines": 2, "devices": 8}, None),  # no node has 8
        ({"machines": 4, "devices": 0}, None),  # three nodes
    ],
)
def test_a_job_becomes_ray_workers_or_does_not_fit(config: dict[str, Any], plan: RayPlan | None) -> None:
    assert RayCluster.from_answer("head:6379", ANSWER).plan(config) == plan


def test_a_cpu_cluster_runs_auto_devices_on_the_cpu() -> None:
    cpu_only = RayCluster.from_answer("x:1", {"nodes": [{"cpus": 2}, {"cpus": 2}]})
    assert cpu_only.plan({"machines": 2}) == RayPlan(workers=2, use_gpu=False, machines=2, per_machine=1)


def test_jobs_across_machines_or_beyond_this_machine_go_to_ray() -> None:
    cluster = RayCluster.from_answer("head:6379", ANSWER)  # two nodes of 4 GPUs
    assert cluster.gpus_per_machine == 4

    def where(config: dict[str, Any], free: int, on: RayCluster | None = cluster) -> bool:
        return runs_on_ray(on, placement(validate_config(config)), free)

    assert where({"machines": 2}, free=8) and where({"machines": 2}, free=0, on=None)
    assert where({"devices": 4}, free=1)  # more than this machine has free: a node of the cluster
    assert not where({"devices": 4}, free=4)  # this machine holds it
    assert not where({"devices": 8}, free=1)  # no single node holds 8: not on Ray (the claim never takes it)
    assert not where({"devices": 4}, free=0, on=None) and not where({}, free=0)


def test_probe_turns_a_refusal_into_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(module: str, spec: dict[str, Any], work_dir: Path, **kwargs: Any) -> dict[str, Any]:
        assert module == "ray_cluster" and spec == {"address": "head:6379"}
        message = "no Ray cluster answers at head:6379: Connection refused"
        raise EngineRefusedError(message, [Issue(message)], "RayUnavailableError")

    monkeypatch.setattr(ray_engine, "run_engine_module", refuse)
    with pytest.raises(RayClusterError, match="no Ray cluster answers at head:6379"):
        RayCluster.probe("head:6379", tmp_path)
    assert list(tmp_path.iterdir()) == []  # the probe's scratch folder is gone


def test_probe_reads_the_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_engine, "run_engine_module", lambda *args, **kwargs: ANSWER)
    assert RayCluster.probe("head:6379", tmp_path).machines == 3
