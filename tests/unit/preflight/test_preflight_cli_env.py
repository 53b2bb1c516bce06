"""`tunedeck env` and `tunedeck preflight` from the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

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
