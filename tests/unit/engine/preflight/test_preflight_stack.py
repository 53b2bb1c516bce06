"""Check 1 refuses what a backend lacks, with the reason and the alternative."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.engine.preflight.preflight_data import chat_spec
from tunedeck.engine.host.hardware import HardwareProfile
from tunedeck.engine.preflight import run_preflight

CPU = HardwareProfile(backend="cpu", device_name="cpu", flash_attn_installed=True)
TURING = HardwareProfile(
    backend="cuda", device_name="Tesla T4", capability=(7, 5), supports_fp16=True, cuda_version="12.4"
)


def test_qlora_on_cpu_fails_with_the_reason_and_skips_the_training_checks(tiny_llama_dir: Path, tmp_path: Path) -> None:
    spec = chat_spec(tiny_llama_dir, tmp_path, peft_method="qlora")
    report = run_preflight(spec, hardware=CPU)
    stack = report.check("stack")
    assert stack.status == "fail"
    assert "qlora" in stack.message and "needs a CUDA GPU with bitsandbytes" in stack.message
    assert any('"lora"' in line for line in stack.advice)
    assert [report.check(n).status for n in (4, 5, 6, 7)] == ["skip"] * 4
    assert report.check(4).message == "not run: an earlier check failed (check 1 stack)"
    assert not report.ok and report.to_dict()["status"] == "fail"
    assert len(report.to_dict()["checks"]) == 10  # all but the interconnect


def test_an_8_bit_optimizer_on_cpu_fails_the_stack_check_with_the_alternative(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    spec = chat_spec(tiny_llama_dir, tmp_path, optim="paged_adamw_8bit")
    stack = run_preflight(spec, hardware=CPU, only={1}).check(1)
    assert stack.status == "fail"
    assert 'optim: "paged_adamw_8bit" needs a CUDA GPU with bitsandbytes' in stack.message
    assert any('optim "adamw"' in line for line in stack.advice)
    fine = run_preflight(chat_spec(tiny_llama_dir, tmp_path, optim="adafactor"), hardware=CPU, only={1}).check(1)
    assert fine.status != "fail" and fine.figures["optimizer"] == "adafactor"


def test_bf16_on_pre_ampere_cuda_fails_with_the_alternative(tiny_llama_dir: Path, tmp_path: Path) -> None:
    spec = chat_spec(tiny_llama_dir, tmp_path, mixed_precision="bf16")
    report = run_preflight(spec, hardware=TURING, only={1})
    stack = report.check(1)
    assert stack.status == "fail"
    assert '"bf16" is not supported on Tesla T4 (cuda)' in stack.message
    assert 'use "fp16"' in stack.message
    assert stack.figures["compute_capability"] == "7.5" and stack.figures["bf16_supported"] is False


def test_flash_attention_on_cpu_fails_with_the_alternative(tiny_llama_dir: Path, tmp_path: Path) -> None:
    spec = chat_spec(tiny_llama_dir, tmp_path, attn_implementation="flash_attention_2")
    stack = run_preflight(spec, hardware=CPU, only={1}).check(1)
    assert stack.status == "fail"
    assert "it needs a CUDA or ROCm GPU (found cpu)" in stack.message
    assert any('"auto"' in line for line in stack.advice)


def test_supported_options_on_cpu_only_warn_about_speed(tiny_llama_dir: Path, tmp_path: Path) -> None:
    stack = run_preflight(chat_spec(tiny_llama_dir, tmp_path), hardware=CPU, only={1}).check(1)
    assert stack.status == "warn" and stack.figures["resolved_precision"] == "fp32"


def test_a_blank_config_passes_the_stack_check_where_there_is_no_bf16_and_says_what_auto_chose(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    from tunedeck.config.training import TrainingConfig
    from tunedeck.engine.training.run_spec import RunSpec

    base = chat_spec(tiny_llama_dir, tmp_path)
    blank = RunSpec(TrainingConfig(), base.model, base.train_path, base.out_dir)
    assert blank.config.mixed_precision == "auto"
    on_cpu = run_preflight(blank, hardware=CPU, only={1}).check(1)
    assert on_cpu.status == "warn" and on_cpu.figures["resolved_precision"] == "fp32"
    assert on_cpu.figures["requested_precision"] == "auto" and "fp32 (mixed_precision auto)" in on_cpu.message
    on_turing = run_preflight(blank, hardware=TURING, only={1}).check(1)
    assert on_turing.status != "fail" and on_turing.figures["resolved_precision"] == "fp16"


def test_check_1_fails_when_torch_cannot_use_the_machines_nvidia_gpus(
    tiny_llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.hostcheck.machines import nvidia_smi, runner
    from tunedeck.engine.host import gpu_reach
    from tunedeck.hostcheck.torch_use import InstalledTorch

    monkeypatch.setattr(gpu_reach, "installed_torch", lambda: InstalledTorch("2.13.0+cpu", None, None, False))
    monkeypatch.setattr(gpu_reach, "run_tool", runner(nvidia_smi("580.95.05", "13.0")))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    stack = run_preflight(chat_spec(tiny_llama_dir, tmp_path), hardware=CPU, only={1}).check(1)
    assert stack.status == "fail" and "2.13.0+cpu is a CPU-only build" in stack.message
    assert any("torch build for this machine's GPUs" in line for line in stack.advice)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hidden on purpose: the job trains on the CPU
    assert run_preflight(chat_spec(tiny_llama_dir, tmp_path), hardware=CPU, only={1}).check(1).status != "fail"
