"""Preflight on a real GPU: memory peaks from torch, telemetry from NVML or amdsmi, bf16 where the GPU has it.

Figures are printed and saved to $TUNEDECK_GPU_FIGURES (default: the test's folder) so a
run on a GPU machine leaves them for the closing note.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.integration.engine.engine_data import fast_config, write_chat
from tunedeck.engine.host.hardware import detect_hardware
from tunedeck.engine.models.model_source import ModelRef
from tunedeck.engine.preflight import PreflightOptions, run_preflight
from tunedeck.engine.training.run_spec import RunSpec


@pytest.mark.gpu
def test_preflight_on_the_gpu_measures_memory_and_telemetry(tiny_llama_dir: Path, tmp_path: Path) -> None:
    hardware = detect_hardware()
    assert hardware.backend in ("cuda", "rocm")
    config = fast_config(
        batch_size=8,
        gradient_accumulation_steps=2,
        gradient_checkpointing=True,  # checks 10 and 11 both run, in half precision
        max_length=256,
        mixed_precision="auto",
        save_strategy="steps",
        save_steps=2,
    )
    spec = RunSpec(config, ModelRef(str(tiny_llama_dir)), write_chat(tmp_path, 64), tmp_path / "run")
    options = PreflightOptions(overfit_steps=20, throughput_steps=12, throughput_warmup_steps=3)
    report = run_preflight(spec, hardware=hardware, options=options)
    document = report.to_dict()
    target = Path(os.environ.get("TUNEDECK_GPU_FIGURES", tmp_path)) / "gpu_preflight.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(document, indent=2, default=str), encoding="utf-8")
    for check in document["checks"]:
        print(check["number"], check["name"], check["status"], check["message"])
    print("memory fit:", json.dumps(document["memory_fit"], default=str))
    print("figures saved to", target)

    statuses = {check["name"]: check["status"] for check in document["checks"]}
    assert all(status in ("pass", "warn") for status in statuses.values()), statuses
    for numerics in ("accumulation", "activation_checkpointing"):
        figures = report.check(numerics).figures
        assert figures["relative_difference"] <= figures["tolerance"]
    step = report.check("full_step").figures
    assert step["accelerator_peak_bytes"] > 0 and step["host_peak_bytes"] > 0
    fit = document["memory_fit"]
    assert fit["cap_source"] == "accelerator" and fit["per_example_bytes"] >= 0
    assert report.check("stack").figures["resolved_precision"] == ("bf16" if hardware.supports_bf16 else "fp16")
    gpu = report.check("throughput").figures["gpu"]
    if hardware.backend == "cuda":
        assert gpu["available"] and gpu["samples"] >= 2 and gpu["temperature_c"] is not None
    assert report.check("checkpoint_cycle").status == "pass"
