"""How the worker launches a run: one process, or torchrun for several; which devices the run may see."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tunedeck.config.loading import validate_config
from tunedeck.core.errors import ConfigError
from tunedeck.core.launcher import GROUP_RESTARTS, engine_command
from tunedeck.store.jobs import needed_devices
from tunedeck.web.job_view import distribution_from
from tunedeck.worker.child_process import device_env
from tunedeck.worker.execution import job_placement


def test_one_process_runs_the_child_and_several_run_under_torchrun(tmp_path: Path) -> None:
    spec, outcome = tmp_path / "spec.json", tmp_path / "outcome.json"
    assert engine_command(spec) == [sys.executable, "-m", "tunedeck.engine.child", "--spec", str(spec)]
    command = engine_command(spec, 4, outcome)
    assert command[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc-per-node=4" in command and "--standalone" in command
    assert f"--max-restarts={GROUP_RESTARTS}" in command  # an out-of-memory restarts every rank
    assert command[-6:] == ["-m", "tunedeck.engine.child", "--spec", str(spec), "--outcome", str(outcome)]


def test_devices_shown_to_a_run() -> None:
    assert device_env(()) == {}  # "auto": the worker's own view
    assert device_env((), hide=True) == {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}
    assert device_env(("3", "5"))["CUDA_VISIBLE_DEVICES"] == "3,5"


def test_placement_from_a_stored_config() -> None:
    assert job_placement({"devices": 0, "processes": 2}).processes == 2
    assert job_placement({"devices": 3}).processes == 3
    assert job_placement({"devices": "nonsense"}).processes == 1  # the engine refuses it with the reason


def test_devices_needed_follows_the_config_and_refuses_a_contradiction() -> None:
    assert needed_devices(validate_config({"devices": 2}), None) == 2
    assert needed_devices(validate_config({}), None) == 0
    assert needed_devices(validate_config({}), 1) == 1  # "auto" takes the count the request gives
    with pytest.raises(ConfigError, match="contradicts the config's devices 2"):
        needed_devices(validate_config({"devices": 2}), 4)


def test_job_page_reads_the_distribution_from_the_run_config() -> None:
    assert distribution_from(None) is None and distribution_from({"derived": {}}) is None
    run_config = json.loads(json.dumps({"derived": {
        "strategy": {"strategy": "fsdp", "cpu_offload": True, "reason": "does not fit"},
        "ranks": [{"rank": 0, "host": "a", "device": "cuda:0", "device_id": "3"}, "junk"],
    }}))
    shown = distribution_from(run_config)
    assert shown is not None and (shown.strategy, shown.cpu_offload) == ("fsdp", True)
    assert [rank["rank"] for rank in shown.ranks] == [0]
