"""The benchmark harness: alternation, medians and verdicts, the JSON and plot it writes, the summary table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.harness import BenchmarkResult, Comparison, Measurement, percentile, run_alternating, write_result
from benchmarks.run_all import write_summary


def test_repetitions_alternate_which_side_runs_first_and_ratios_are_candidate_over_baseline() -> None:
    calls: list[str] = []

    def side(name: str, value: float):
        def run() -> float:
            calls.append(name)
            return value

        return run

    comparison = Comparison("k", "title", "s", "base", "ours", higher_is_better=False, target_ratio=0.5)
    run_alternating(comparison, side("b", 2.0), side("c", 0.5), repeats=3)
    assert calls == ["b", "c", "b", "c", "c", "b", "b", "c"]  # warm-up pair, then alternating order
    assert comparison.first == ["baseline", "candidate", "baseline"]
    assert comparison.ratios() == [0.25, 0.25, 0.25]
    assert comparison.met() is True
    assert comparison.target_text() == "≤ 0.5×"


def test_median_ratio_ignores_one_disturbed_repetition_and_verdict_follows_direction() -> None:
    comparison = Comparison("k", "t", "tok/s", "b", "c", higher_is_better=True, target_ratio=1.8,
                            baseline_values=[100, 100, 100], candidate_values=[200, 20, 190], first=["b"] * 3)
    assert comparison.median_ratio() == pytest.approx(1.9)
    assert comparison.met() is True
    assert Measurement("m", "t", "s", False, target=1.0, values=[0.2, 3.0, 0.4]).met() is True
    assert Measurement("m", "t", "s", False, values=[1.0]).met() is None
    assert percentile([5, 1, 3, 2, 4], 0.5) == 3


def test_write_result_writes_strict_json_with_machine_facts_a_plot_and_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = BenchmarkResult("demo", "a demo", parameters={"rows": 3})
    result.comparisons.append(Comparison("k", "Demo ratio", "tokens/s", "base", "ours", True, 1.5,
                                         [10.0, 12.0], [20.0, 30.0], ["baseline", "candidate"]))
    result.measurements.append(Measurement("lat", "Latency", "s", False, 1.0, [0.1, 0.2]))
    result.checks["exactness"] = {"max_abs_difference": 1e-7, "tolerance": 1e-5, "exact": True}
    path = write_result(result, tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["benchmark"] == "demo"
    assert data["comparisons"][0]["median_ratio"] == pytest.approx(2.25)
    assert [r["ratio"] for r in data["comparisons"][0]["repetitions"]] == [2.0, 2.5]
    assert data["comparisons"][0]["met"] is True
    assert data["measurements"][0]["median"] == pytest.approx(0.15)
    assert data["machine"]["cpus"] >= 1
    assert len(data["load_average"]["before"]) == 3
    assert "torch" in data["versions"]
    assert (tmp_path / "demo.png").read_bytes()[:4] == b"\x89PNG"
    assert "Demo ratio" in capsys.readouterr().out


def test_summary_table_reads_comparisons_and_measurements(tmp_path: Path) -> None:
    result = BenchmarkResult("demo", "a demo")
    result.comparisons.append(Comparison("k", "Demo ratio", "tokens/s", "base", "ours", True, 1.5,
                                         [10.0], [9.0], ["baseline"]))
    write_result(result, tmp_path, plot=False)
    dashboard = BenchmarkResult("dashboard", "pages")
    dashboard.measurements.append(Measurement("sqlite_job_page_ms", "Job page, long run (sqlite)", "ms",
                                              higher_is_better=False, target=300.0, values=[21.5]))
    write_result(dashboard, tmp_path, plot=False)
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    text = write_summary(tmp_path, [{"name": "demo", "exit_code": 1, "seconds": 1.0}]).read_text(encoding="utf-8")
    assert "| demo | Demo ratio | 10 tokens/s | 9 tokens/s | 0.9× | ≥ 1.5× | **no** |" in text
    assert "| dashboard | Job page, long run (sqlite) |  | 21.5 ms |  | < 300 ms | yes |" in text
    assert "Failed in this run: demo (exit 1)" in text
