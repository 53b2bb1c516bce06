"""Check 8 counts the baseline and final evaluations: their measured time and their files on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.engine.engine_data import write_chat
from tests.unit.engine.preflight.preflight_data import FAST_OPTIONS, chat_spec
from tunedeck.engine.preflight import run_preflight
from tunedeck.engine.preflight.eval_cost import EvalCost
from tunedeck.engine.preflight.margins import BASELINE_FINAL_PASSES, EVAL_ROW_BYTES, evaluation_margins

REPORTED_SECONDS_ROUNDING = 0.5e-3  # round(seconds, 3) in the margins' figures
PER_ROW_ROUNDING = 0.5e-6  # round(seconds_per_row, 6) in the measured evaluation cost


def test_baseline_and_final_evaluations_use_the_measured_cost_per_row() -> None:
    cost = EvalCost(rows_measured=4, seconds_per_row=0.5, bytes_per_row=1000.0, fixed_bytes=300, task="generation")
    margins = evaluation_margins(200, trainer_evaluations=3, step_s=1.2, effective_batch=8, cost=cost)
    assert margins.baseline_final_passes == BASELINE_FINAL_PASSES == 2
    assert margins.baseline_final_seconds == pytest.approx(2 * 200 * 0.5)
    assert margins.trainer_seconds == pytest.approx(3 * 200 * 1.2 / 8 / 3)  # eval_loss: a forward pass a row
    assert margins.seconds == pytest.approx(margins.baseline_final_seconds + margins.trainer_seconds)
    assert margins.file_bytes == 2 * (300 + 200 * 1000)
    assert margins.measured


def test_without_a_measurement_the_evaluations_are_estimated_not_left_out() -> None:
    margins = evaluation_margins(100, trainer_evaluations=1, step_s=0.9, effective_batch=3, cost=None)
    assert not margins.measured
    assert margins.baseline_final_seconds == pytest.approx(2 * 100 * 0.9 / 3 / 3)
    assert margins.file_bytes == 2 * 100 * EVAL_ROW_BYTES
    assert evaluation_margins(0, 0, 1.0, 8, None).file_bytes == 0  # no validation file, no evaluation files


def test_packed_runs_evaluate_examples_not_packed_rows() -> None:
    cost = EvalCost(rows_measured=2, seconds_per_row=0.1, bytes_per_row=10.0, fixed_bytes=0, task="generation")
    margins = evaluation_margins(5, 1, 1.0, 1, cost, baseline_rows=40)
    assert margins.validation_rows == 40 and margins.baseline_final_seconds == pytest.approx(2 * 40 * 0.1)


@pytest.mark.slow
def test_preflight_margins_measure_the_baseline_evaluation_and_count_its_files(
    tiny_llama_dir: Path, tmp_path: Path
) -> None:
    from dataclasses import replace

    spec = chat_spec(tiny_llama_dir, tmp_path, eval_strategy="epoch")
    validation = write_chat(tmp_path, 6, name="validation.jsonl")
    spec = replace(spec, validation_path=validation)
    options = replace(FAST_OPTIONS, eval_sample_rows=2)
    report = run_preflight(spec, options=options, only={1, 2, 3, 4, 7, 8})

    measured = report.check("throughput").figures["evaluation"]
    assert measured["rows_measured"] == 2 and measured["task"] == "generation"
    assert measured["seconds_per_row"] > 0 and measured["bytes_per_row"] > 0
    margins = report.check("margins").figures
    evaluation = margins["evaluation"]
    assert evaluation["measured"] and evaluation["validation_rows"] == 6
    # The report rounds seconds per row to 6 decimals and the pass time to 3: the figures agree within
    # those two roundings, whatever the measured time (a relative tolerance breaks on small times).
    assert evaluation["baseline_final_seconds"] == pytest.approx(
        2 * 6 * measured["seconds_per_row"], abs=REPORTED_SECONDS_ROUNDING + 2 * 6 * PER_ROW_ROUNDING
    )
    assert margins["eval_file_bytes"] == evaluation["file_bytes"] > 2 * 6 * measured["bytes_per_row"]
    assert margins["disk_needed_bytes"] >= (
        margins["checkpoint_bytes"] * margins["checkpoints_kept"]
        + margins["final_bytes"]
        + margins["log_bytes"]
        + margins["eval_file_bytes"]
    )
    # Four figures each rounded to 3 decimals (the total and its three parts), plus float noise.
    assert margins["projected_total_seconds"] == pytest.approx(
        margins["projected_training_seconds"] + evaluation["trainer_seconds"] + evaluation["baseline_final_seconds"],
        abs=4 * REPORTED_SECONDS_ROUNDING + 1e-9,
    )
