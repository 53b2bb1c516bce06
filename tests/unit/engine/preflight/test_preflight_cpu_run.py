"""The whole preflight on a CPU with a tiny model, and the memory fit under a simulated cap."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.engine.preflight.preflight_data import FAST_OPTIONS, chat_spec
from tunedeck.engine.preflight import PreflightReport, run_preflight

pytestmark = pytest.mark.slow  # the whole preflight trains and measures on CPU
CONFIG: dict[str, Any] = {"batch_size": 8, "gradient_accumulation_steps": 2, "save_strategy": "steps", "save_steps": 2}


@pytest.fixture(scope="module")
def cpu_report(tiny_llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> PreflightReport:
    folder = tmp_path_factory.mktemp("preflight")
    return run_preflight(chat_spec(tiny_llama_dir, folder, **CONFIG), options=FAST_OPTIONS)


def test_every_check_reports_its_figures_in_json(cpu_report: PreflightReport) -> None:
    document = json.loads(json.dumps(cpu_report.to_dict()))
    assert [check["number"] for check in document["checks"]] == [*range(1, 9), 10, 11]
    statuses = {check["name"]: check["status"] for check in document["checks"]}
    assert statuses.pop("activation_checkpointing") == "skip"  # the run does not checkpoint
    assert document["checks"][-2]["figures"]["micro_batches"] == 2  # the config's accumulation
    assert statuses["stack"] == "warn"  # CPU only
    assert all(status in ("pass", "warn") for status in statuses.values()), document
    assert document["ok"] is True
    figures = {check["name"]: check["figures"] for check in document["checks"]}
    assert figures["checkpoint_and_disk"]["fingerprint"] and figures["checkpoint_and_disk"]["free_bytes"] > 0
    assert figures["tokenization"]["examples"][0]["trained_tokens"] > 0
    assert figures["tokenization"]["examples"][0]["masked_tokens"] > 0
    step = figures["full_step"]
    assert step["host_peak_bytes"] > 0 and step["accelerator_peak_bytes"] is None
    assert step["measured"]["8"]["sequence_length"] == 128  # tiled to max_length
    assert set(step["measured"]) == {"4", "8"}
    assert figures["overfit"]["drop"] >= FAST_OPTIONS.overfit_min_drop
    cycle = figures["checkpoint_cycle"]
    assert cycle["steps_after_resume"] == [3] and cycle["generation"]["new_tokens"] > 0
    assert cycle["reloaded_loss"] == pytest.approx(cycle["reference_loss"], rel=1e-3)
    throughput = figures["throughput"]
    assert throughput["measured_steps"] == 3 and throughput["sustained_step_seconds"] > 0
    assert throughput["gpu"]["available"] is False  # no GPU telemetry on a CPU
    margins = figures["margins"]
    assert margins["total_steps"] == 1  # 16 rows / (8 × 2) per step, one epoch
    # One optimizer step: the run would report success having learnt next to nothing.
    assert statuses["margins"] == "warn"
    warning = next(check for check in document["checks"] if check["name"] == "margins")
    assert "only 1 optimizer step" in warning["message"]
    assert any(advice.startswith("epochs: at least 10 steps") for advice in warning["advice"])
    assert margins["checkpoint_bytes"] == cycle["checkpoint_bytes"]
    assert margins["projected_total_seconds"] > 0
    assert document["memory_fit"]["micro_batch"] == 8 and document["memory_fit"]["cap_source"] == "host"


def test_a_simulated_memory_cap_picks_a_smaller_micro_batch_with_the_same_effective_batch(
    cpu_report: PreflightReport, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    measured = cpu_report.memory_fit
    assert measured is not None and measured["per_example_bytes"] > 0
    # A cap under which about 2.5 examples fit on the line measured by the first preflight.
    usable = measured["base_bytes"] + 2.5 * measured["per_example_bytes"]
    cap = int(usable / (1 - FAST_OPTIONS.safety_margin))
    spec = chat_spec(tiny_llama_dir, tmp_path, **CONFIG)
    report = run_preflight(spec, options=FAST_OPTIONS, memory_cap_bytes=cap, only={1, 2, 3, 4})
    fit = report.memory_fit
    assert fit is not None and fit["cap_source"] == "simulated" and fit["cap_bytes"] == cap
    assert fit["changed"] and fit["micro_batch"] < 8
    assert fit["micro_batch"] * fit["accumulation"] == 16 and fit["exact"]
    assert report.check("full_step").status in ("warn", "fail")
    assert [check.number for check in report.checks] == [1, 2, 3, 4]
