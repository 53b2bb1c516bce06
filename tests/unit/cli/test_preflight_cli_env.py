"""`tunedeck env` and `tunedeck preflight` from the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.integration.engine.engine_data import write_chat
from tunedeck.cli.main import app
from tunedeck.cli.preflight_command import parse_bytes
from tunedeck.engine.host.host_info import source_commit

runner = CliRunner()


def test_env_prints_versions_hardware_host_seeds_and_build(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"seed": 7}), encoding="utf-8")
    result = runner.invoke(app, ["env", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["packages"]["torch"] and document["torch"]["version"]
    assert document["hardware"]["backend"] == "cpu"
    assert document["host_details"]["cpu_cores_logical"] >= 1 and document["host_details"]["memory_total_bytes"] > 0
    assert document["seeds"]["config_seed"] == 7
    assert document["tunedeck"]["commit"] == source_commit()
    assert "driver_version" in document["driver"]
    table = runner.invoke(app, ["env"])
    assert table.exit_code == 0 and "tunedeck env" in table.output


def test_the_commit_is_read_from_the_checkout() -> None:
    commit = source_commit()
    assert commit is None or re.fullmatch(r"[0-9a-f]{40}", commit)
    assert source_commit(Path("/")) is None


def test_preflight_exits_1_and_reports_the_failed_check_as_json(tiny_llama_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"use_peft": True, "peft_method": "qlora", "max_length": 64}), encoding="utf-8")
    train = write_chat(tmp_path, 4)
    args = ["preflight", "--config", str(config), "--model", str(tiny_llama_dir), "--train", str(train)]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "run"), "--json"])
    assert result.exit_code == 1
    document = json.loads(result.output)
    assert document["status"] == "fail" and len(document["checks"]) == 10
    assert document["checks"][0]["status"] == "fail" and "qlora" in document["checks"][0]["message"]
    table = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert table.exit_code == 1 and "preflight: fail" in table.output


def test_memory_cap_sizes_parse() -> None:
    assert parse_bytes("24GiB") == 24 * 2**30
    assert parse_bytes("512m") == 512 * 2**20
    assert parse_bytes("1000") == 1000


def test_env_fails_on_an_nvidia_machine_whose_torch_cannot_use_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from tests.unit.hostcheck.machines import nvidia_smi
    from tests.unit.hostcheck.machines import runner as tools
    from tunedeck.engine.host import gpu_reach
    from tunedeck.hostcheck.torch_use import InstalledTorch

    assert gpu_reach.installed_torch().version == str(torch.__version__)
    monkeypatch.setattr(gpu_reach, "installed_torch", lambda: InstalledTorch("2.13.0+cpu", None, None, False))
    monkeypatch.setattr(gpu_reach, "run_tool", tools(nvidia_smi("580.95.05", "13.0")))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    result = runner.invoke(app, ["env"])
    assert result.exit_code == 1
    assert "this machine has 2 NVIDIA GPUs (NVIDIA H100 80GB HBM3)" in result.output
    assert "make clean install" in result.output
    as_json = runner.invoke(app, ["env", "--json"])
    assert as_json.exit_code == 1 and "NVIDIA GPUs" in as_json.stdout
