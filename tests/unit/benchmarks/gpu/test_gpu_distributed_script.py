"""The multi-device throughput script: its options, arms, configs, exact-length rows, and its CPU dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.gpu import distributed_throughput as bench


def test_options_defaults_rounding_and_dry_run_sizes() -> None:
    args = bench.parse_args([])
    assert args.modes == ["lora", "full"] and args.time_budget_s <= 480 and args.devices is None
    assert args.warmup % args.logging_steps == 0 and args.steps % args.logging_steps == 0
    rounded = bench.parse_args(["--warmup", "7", "--steps", "11", "--logging-steps", "5"])
    assert (rounded.warmup, rounded.steps) == (10, 15)
    dry = bench.parse_args(["--dry-run", "--modes", "full"])
    assert dry.modes == ["full"] and dry.steps <= 3 and dry.logging_steps == 1 and dry.example_tokens <= dry.max_length
    for wrong in (["--modes", "qlora"], ["--devices", "0"], ["--example-tokens", "4096"]):
        with pytest.raises(SystemExit):
            bench.parse_args(wrong)


def test_arms_follow_the_visible_gpus() -> None:
    arms, skipped = bench.plan_arms(1, None, offload=True, dry_run=False)
    assert [arm.name for arm in arms] == ["single"]
    assert set(skipped) == {"ddp", "fsdp", "fsdp_offload"} and "at least 2 GPUs" in skipped["ddp"]
    arms, skipped = bench.plan_arms(4, None, offload=False, dry_run=False)
    assert [(arm.name, arm.processes) for arm in arms] == [("single", 1), ("ddp", 4), ("fsdp", 4)] and not skipped
    arms, _ = bench.plan_arms(4, 2, offload=True, dry_run=False)
    assert [(arm.name, arm.processes, arm.offload) for arm in arms][-1] == ("fsdp_offload", 2, True)
    arms, skipped = bench.plan_arms(2, 8, offload=False, dry_run=False)
    assert [arm.name for arm in arms] == ["single"] and "2 GPU(s) visible" in skipped["fsdp"]
    arms, skipped = bench.plan_arms(0, None, offload=False, dry_run=True)
    assert [(arm.name, arm.processes) for arm in arms] == [("single", 1), ("ddp", 2)] and "fsdp" in skipped


def test_every_arm_config_validates_with_the_same_micro_batch() -> None:
    from tunedeck.config.distribution import placement
    from tunedeck.config.loading import validate_config

    args = bench.parse_args([])
    arms, _ = bench.plan_arms(4, None, offload=True, dry_run=False)
    for arm in arms:
        for lora in (True, False):
            config = validate_config(bench.arm_config(arm, lora, args))
            assert config.batch_size == args.batch_size and config.preflight is False
            assert placement(config).processes == arm.processes == config.devices
            assert config.strategy == arm.strategy and config.use_peft is lora
    dry = bench.parse_args(["--dry-run"])
    ddp = validate_config(bench.arm_config(bench.Arm("ddp", 2, "ddp"), True, dry))
    assert (ddp.devices, ddp.processes, placement(ddp).hide_devices) == (0, 2, True)


def test_gpu_ids_are_the_first_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert bench.gpu_ids(3) == ("0", "1", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6")
    assert bench.gpu_ids(2) == ("4", "5")


def test_rows_tokenize_to_exactly_the_asked_length(tmp_path: Path) -> None:
    from tunedeck.demo.tiny_corpus import builtin_corpus
    from tunedeck.demo.tiny_models import build_tokenizer

    tokenizer = build_tokenizer(builtin_corpus(), "llama")  # the tokenizer of both the tiny and the 0.5B model
    path = bench.write_rows(tmp_path / "train.jsonl", tokenizer, 12, 40)  # checks every row's length itself
    assert len(path.read_text(encoding="utf-8").splitlines()) == 12


def test_spent_budget_skips_every_arm(tmp_path: Path) -> None:
    bench.main(["--dry-run", "--modes", "full", "--time-budget-s", "0", "--results-dir", str(tmp_path)])
    data = json.loads((tmp_path / "gpu_distributed_throughput_dry_run.json").read_text(encoding="utf-8"))
    assert data["checks"]["arms"] == {}
    assert data["parameters"]["skipped_arms"]["full/single"] == "time budget spent"


@pytest.mark.slow
def test_dry_run_trains_single_and_ddp_through_the_engine(tmp_path: Path) -> None:
    bench.main(["--dry-run", "--modes", "full", "--results-dir", str(tmp_path)])
    data = json.loads((tmp_path / "gpu_distributed_throughput_dry_run.json").read_text(encoding="utf-8"))
    arms = data["checks"]["arms"]
    assert set(arms) == {"full/single", "full/ddp"}, data["parameters"]["skipped_arms"]
    single, ddp = arms["full/single"], arms["full/ddp"]
    assert single["processes"] == 1 and single["strategy"] == "none" and single["engine_tokens_ratio"] == 1.0
    assert ddp["processes"] == 2 and ddp["strategy"] == "ddp" and [r["rank"] for r in ddp["ranks"]] == [0, 1]
    for figures in arms.values():
        assert figures["tokens_per_s"] > 0 and figures["steps_measured"] == 3 and figures["wall_s"] > 0
    # The same micro-batch per device: twice the tokens per step on two processes.
    assert ddp["tokens"] == 2 * single["tokens"]
    assert ddp["scaling_efficiency"] == pytest.approx(ddp["tokens_per_s_per_device"] / single["tokens_per_s"])
    assert "fsdp" in data["parameters"]["skipped_arms"]
    assert [c["key"] for c in data["comparisons"]] == ["full_ddp"]
