"""`tunedeck models create-tiny` and `tunedeck train` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.data import write_jsonl
from tests.waiting import HANG_S
from tunedeck.cli.main import app
from tunedeck.engine.training.loss_normalisation import PER_TOKEN

runner = CliRunner()


def test_create_tiny_builds_a_model_folder(tmp_path: Path) -> None:
    result = runner.invoke(app, ["models", "create-tiny", "--arch", "bert", "--out", str(tmp_path / "bert")])
    assert result.exit_code == 0, result.output
    assert "created bert" in result.output
    assert (tmp_path / "bert" / "model.safetensors").is_file()
    refused = runner.invoke(app, ["models", "create-tiny", "--arch", "t5", "--out", str(tmp_path / "t5")])
    assert refused.exit_code == 1 and not (tmp_path / "t5").exists()


def test_train_prints_a_summary_and_writes_the_run(tiny_gpt2_dir: Path, tmp_path: Path) -> None:
    rows = [{"prompt": f"Q{i}: say yes.\nA:", "completion": " yes"} for i in range(12)]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    validation = write_jsonl(tmp_path / "validation.jsonl", rows[:4])
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "epochs": 2,
                "batch_size": 4,
                "gradient_accumulation_steps": 1,
                "learning_rate": 1e-3,
                "mixed_precision": "auto",
                "gradient_checkpointing": True,
                "save_strategy": "epoch",
                "eval_strategy": "epoch",
                "logging_steps": 1,
                "max_length": 64,
            }
        )
    )
    args = ["train", "--config", str(config), "--model", str(tiny_gpt2_dir), "--train", str(train)]
    args += ["--validation", str(validation), "--out", str(tmp_path / "run")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "run succeeded" in result.output and "6 / 6" in result.output and "eval_loss" in result.output
    # The checks before training ran first, as for a job: their table, and their report in the run folder.
    assert result.output.index("preflight: ") < result.output.index("run succeeded")
    report = json.loads((tmp_path / "run" / "preflight.json").read_text(encoding="utf-8"))
    names = {check["name"] for check in report["checks"]}
    assert report["ok"] and names >= {"accumulation", "activation_checkpointing"}
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["loss_normalisation"] == PER_TOKEN and "loss normalised" in result.output
    assert (tmp_path / "run" / "final" / "adapter_model.safetensors").is_file()
    assert sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir()) == ["checkpoint-3", "checkpoint-6"]


def test_train_refuses_a_run_that_fails_the_checks_before_training(tiny_llama_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"use_peft": True, "peft_method": "qlora", "max_length": 64}))  # needs a CUDA GPU
    train = write_jsonl(tmp_path / "train.jsonl", [{"prompt": f"Q{i}?", "completion": " yes"} for i in range(4)])
    args = ["train", "--config", str(config), "--model", str(tiny_llama_dir), "--train", str(train)]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "preflight: fail" in result.output and "preflight failed: 1 stack" in result.output
    assert "qlora" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()


def test_train_with_preflight_false_skips_the_checks(
    tiny_gpt2_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tunedeck.engine.preflight import runner as preflight_runner

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the checks ran although the config turns them off")

    monkeypatch.setattr(preflight_runner, "run_preflight", refuse)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"preflight": False, "batch_size": 4, "max_length": 32, "save_strategy": "no",
                                  "eval_strategy": "no", "gradient_checkpointing": False,
                                  "mixed_precision": "fp32"}))  # fmt: skip
    train = write_jsonl(tmp_path / "train.jsonl", [{"prompt": f"Q{i}?", "completion": " yes"} for i in range(4)])
    args = ["train", "--config", str(config), "--model", str(tiny_gpt2_dir), "--train", str(train)]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "run succeeded" in result.output and "preflight: " not in result.output
    assert not (tmp_path / "run" / "preflight.json").exists()


def test_train_reports_a_bad_config_without_a_traceback(tiny_gpt2_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"batch_sise": 4}))
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": "hello"}])
    args = ["train", "--config", str(config), "--model", str(tiny_gpt2_dir), "--train", str(train)]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "batch_size" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_train_on_two_processes_relaunches_itself_under_torchrun(tiny_gpt2_dir: Path, tmp_path: Path) -> None:
    rows = [{"prompt": f"Q{i}: say yes.\nA:", "completion": " yes"} for i in range(16)]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "epochs": 1, "batch_size": 2, "gradient_accumulation_steps": 1, "mixed_precision": "fp32",
        "gradient_checkpointing": False, "save_strategy": "no", "eval_strategy": "no", "preflight": False,
        "devices": 0, "processes": 2,
    }), encoding="utf-8")
    out = tmp_path / "run"
    command = [sys.executable, "-m", "tunedeck.cli.main", "train", "--config", str(config),
               "--model", str(tiny_gpt2_dir), "--train", str(train), "--out", str(out), "--no-cache"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_S * 3, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "training on 2 processes (torchrun)" in done.stdout
    # 16 rows, 2 per process per step: 4 steps, counted over both processes, and one summary.
    assert done.stdout.count("run succeeded") == 1 and "4 / 4" in done.stdout
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["global_step"] == results["total_steps"] == 4
