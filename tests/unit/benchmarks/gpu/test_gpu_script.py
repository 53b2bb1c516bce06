"""The GPU throughput script: its options, its FLOP accounting, and its CPU dry run end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.gpu import train_throughput as gpu


def test_options_defaults_modes_and_dry_run_sizes() -> None:
    args = gpu.parse_args([])
    assert args.modes == ["lora", "full"] and args.steps == 30 and args.time_budget_s <= 480
    dry = gpu.parse_args(["--dry-run", "--modes", "full"])
    assert dry.modes == ["full"] and dry.steps <= 3 and dry.max_length == 64
    with pytest.raises(SystemExit):
        gpu.parse_args(["--modes", "qlora"])


def test_flops_follow_6n_plus_attention_and_the_two_thirds_lora_convention() -> None:
    config = gpu.model_config(dry_run=False)
    n = gpu.matmul_parameters(config)
    assert 0.45e9 < n < 0.65e9  # a ~0.5B model, LM head included
    attention = 12 * config.num_hidden_layers * config.hidden_size * 100 * 100
    assert gpu.flops_per_example(config, 100, lora=False) == 6 * n * 100 + attention
    assert gpu.flops_per_example(config, 100, lora=True) == 4 * n * 100 + attention
    assert gpu.peak_flops("NVIDIA H200", None) == pytest.approx(989.4e12)
    assert gpu.peak_flops("Some GPU", None) is None
    assert gpu.peak_flops("Some GPU", 100.0) == pytest.approx(1e14)


@pytest.mark.slow
def test_dry_run_trains_every_cpu_arm_and_writes_json(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    gpu.main(["--dry-run", "--results-dir", str(tmp_path)])
    data = json.loads((tmp_path / "gpu_train_throughput_dry_run.json").read_text(encoding="utf-8"))
    arms = data["checks"]["arms"]
    names = ("baseline", "packed_sdpa", "micro_batch")
    assert set(arms) == {f"{mode}/{name}" for mode in ("lora", "full") for name in names}
    for figures in arms.values():
        assert figures["tokens_per_s"] > 0 and figures["achieved_tflops"] > 0
    assert arms["full/packed_sdpa"]["rows"] < arms["full/baseline"]["rows"]  # packing made fewer rows
    # Packing each batch keeps the baseline's examples and steps: the same tokens are trained.
    assert arms["full/micro_batch"]["rows"] == arms["full/baseline"]["rows"]
    assert arms["full/micro_batch"]["tokens"] == arms["full/baseline"]["tokens"]
    assert "packed_flash" in data["parameters"]["skipped_arms"]
    assert {c["key"] for c in data["comparisons"]} == {
        f"{mode}_{name}" for mode in ("lora", "full") for name in names[1:]
    }


def test_lora_base_uses_tunedecks_dtype_rule() -> None:
    torch = pytest.importorskip("torch")
    # tunedeck/engine/models/model_loading.py: a PEFT base in half precision on an accelerator, fp32 otherwise.
    assert gpu.base_dtype(lora=True, on_gpu=True) == torch.bfloat16
    assert gpu.base_dtype(lora=False, on_gpu=True) == torch.float32
    assert gpu.base_dtype(lora=True, on_gpu=False) == torch.float32


def test_budget_stops_an_arm_within_its_measurement(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import time

    args = gpu.parse_args(["--dry-run", "--warmup", "0"])
    config = gpu.model_config(dry_run=True)
    examples = gpu.synthetic_examples(args.examples, config.vocab_size, args.max_length)
    arm = gpu.Arm("baseline", packed=False)
    # A deadline already past: the running step finishes, then the arm stops with one step measured.
    figures = gpu.run_arm(arm, False, config, examples, args, "cpu", tmp_path / "a", deadline=time.monotonic())
    assert figures["steps_measured"] == 1 and figures["stopped_by_budget"] is True
    args.warmup = 1  # stopped during warm-up: nothing measured, so the arm is refused, not reported
    with pytest.raises(gpu.BudgetSpent):
        gpu.run_arm(arm, False, config, examples, args, "cpu", tmp_path / "b", deadline=time.monotonic())


def test_spent_budget_skips_arms_and_lists_them(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    gpu.main(["--dry-run", "--modes", "full", "--time-budget-s", "0", "--results-dir", str(tmp_path)])
    data = json.loads((tmp_path / "gpu_train_throughput_dry_run.json").read_text(encoding="utf-8"))
    assert data["checks"]["arms"] == {}
    assert data["parameters"]["skipped_arms"]["full/baseline"] == "time budget spent"
