"""The final job report: model reference, configuration, comparative results and observed limits."""

from __future__ import annotations

import json

from tests.unit.eval.report_data import BASELINE, evaluation
from tunedeck.eval.guards import parse_guards
from tunedeck.eval.job_report import build_job_report


def test_report_lists_the_class_that_got_worse_and_the_other_limits() -> None:
    final = evaluation(0.83, 0.45, {"ham": 0.95, "spam": 0.90, "promo": 0.20})
    final["truncation"] = {"truncated": 2}
    final["examples"] = [{"index": 0, "cut_at_max_new_tokens": True}, {"index": 1, "prompt_truncated": True}]
    report = build_job_report(
        job_id="job_r64",
        name="rank-64",
        state="succeeded",
        model={"base_model": "org/small-model", "revision": "abc123", "artifact": "users/u/jobs/job_r64/final"},
        config={"lora_r": 64, "seed": 42},
        baseline=BASELINE,
        final=final,
        guards=parse_guards(["per_class.promo.f1 >= baseline"]),
        training_truncation={"total": 90, "truncated": 3, "lost_part_of_answer": 1},
        contamination={"contaminated": True, "pairs_by_split": {"validation": 4}, "threshold": 0.8},
    )  # fmt: skip
    limits = report.limits
    assert [(row["class"], row["stat"]) for row in limits["classes_worse"]] == [
        ("promo", "f1"), ("promo", "precision"), ("promo", "recall")
    ]  # fmt: skip
    assert limits["guard_violations"] == ["per_class.promo.f1 >= baseline"]
    assert limits["truncation"]["answers_cut_at_max_new_tokens"] == [0]
    assert limits["truncation"]["evaluation_prompts_truncated"] == [1]
    assert "4 training row(s) duplicate rows of the validation split" in limits["contamination"][0]
    results = {row["metric"]: row for row in report.results}
    assert results["accuracy"]["change"] == "better" and results["eval_loss"]["change"] == "better"

    markdown = report.to_markdown()
    assert "org/small-model" in markdown and "abc123" in markdown
    assert '"lora_r": 64' in markdown
    assert "class promo: f1 got worse, 0.3000 → 0.2000" in markdown
    assert "3 of 90 training rows were cut at max_length (1 lost part of their answer)" in markdown
    assert "guard violated: per_class.promo.f1 >= baseline" in markdown
    assert json.loads(json.dumps(report.to_dict()))["limits"]["classes_worse"][0]["class"] == "promo"


def test_a_job_that_improved_everywhere_reports_no_limit() -> None:
    final = evaluation(0.9, 0.3, {"ham": 0.9, "spam": 0.9, "promo": 0.9})
    report = build_job_report(job_id="j", name="n", state="succeeded", model={}, config={},
                              baseline=BASELINE, final=final)  # fmt: skip
    assert report.limits["classes_worse"] == [] and report.limits["metrics_worse"] == []
    assert "- none observed" in report.to_markdown()
