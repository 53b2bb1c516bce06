"""Comparing three variants of an experiment (one failed), as data, HTML and Markdown."""

from __future__ import annotations

import re

import pytest

from tests.unit.eval.report_data import REFERENCE_CONFIG, three_variants
from tunedeck.eval.comparison_render import comparison_html, comparison_markdown
from tunedeck.eval.experiment_report import Comparison, ExperimentData, build_comparison
from tunedeck.eval.guards import parse_guards


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    data = ExperimentData(
        experiment_id="exp_1",
        name="rank sweep",
        hypothesis="A higher LoRA rank improves spam recall without hurting any class.",
        reference_config=REFERENCE_CONFIG,
        variants=three_variants(),
        guards=parse_guards(["per_class.promo.f1 >= baseline", "accuracy >= 0.5"]),
    )
    return build_comparison(data)


def test_every_variant_is_listed_with_its_config_difference_and_deltas(comparison: Comparison) -> None:
    by_name = {variant.name: variant for variant in comparison.variants}
    assert list(by_name) == ["reference", "rank-64", "lr-1e-2"]
    assert comparison.reference_job_id == "job_ref" and by_name["reference"].is_reference
    assert by_name["reference"].config_diff == {}
    assert by_name["rank-64"].config_diff == {"lora_r": (16, 64)}
    assert by_name["lr-1e-2"].config_diff == {"learning_rate": (1e-4, 0.01)}
    assert by_name["lr-1e-2"].state == "failed" and "NaN" in (by_name["lr-1e-2"].reason or "")
    accuracy = by_name["rank-64"].metrics["accuracy"]
    assert accuracy.delta_baseline == pytest.approx(0.50) and accuracy.delta_reference == pytest.approx(0.03)
    loss = by_name["rank-64"].metrics["eval_loss"]
    assert loss.change == "better" and loss.delta_baseline == pytest.approx(-0.65)
    promo = by_name["rank-64"].per_class["promo"]["f1"]
    assert promo.change == "worse" and promo.delta_reference == pytest.approx(-0.55)
    assert by_name["lr-1e-2"].metrics["accuracy"].value is None
    assert comparison.class_names == ["ham", "spam", "promo"]


def test_guards_flag_the_degraded_class(comparison: Comparison) -> None:
    verdicts = {v.name: {g["guard"]: g["passed"] for g in v.guards} for v in comparison.variants}
    assert verdicts["reference"] == {"per_class.promo.f1 >= baseline": True, "accuracy >= 0.5": True}
    assert verdicts["rank-64"]["per_class.promo.f1 >= baseline"] is False
    assert verdicts["lr-1e-2"] == {}  # nothing to check without a final evaluation


def test_html_is_self_contained_and_shows_everything(comparison: Comparison) -> None:
    html = comparison_html(comparison)
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "<script" not in html
    for name in ("reference", "rank-64", "lr-1e-2", "job_lr"):
        assert name in html
    assert "<mark><strong>lora_r</strong>: 16 → 64</mark>" in html
    assert "<mark><strong>learning_rate</strong>: 0.0001 → 0.01</mark>" in html
    assert "training failed at step 4" in html
    assert "Δbase +0.5000" in html and "Δref +0.0300" in html
    assert html.count('src="data:image/png;base64,') == 1  # the overlaid curves, inline
    assert "VIOLATED" in html


def test_markdown_shows_the_same(comparison: Comparison) -> None:
    markdown = comparison_markdown(comparison)
    for name in ("reference", "rank-64", "lr-1e-2"):
        assert f"| {name}" in markdown
    assert "**lora_r**: 16 → 64" in markdown and "**learning_rate**: 0.0001 → 0.01" in markdown
    assert "failed: training failed at step 4: loss is NaN" in markdown
    assert "0.8300 (Δbase +0.5000, Δref +0.0300)" in markdown
    assert "## Per class" in markdown and "0.2000 (base 0.3000, -0.1000)" in markdown
    assert "## Loss curves" in markdown and "](data:image/png;base64," in markdown
    assert "| lr-1e-2 | loss | 2 | 1.1000 | 9.5000 | 1.1000 |" in markdown
    assert "**VIOLATED**" in markdown


def test_method_breaks_are_warned_about() -> None:
    variants = three_variants()
    variants[1].config["seed"] = 7
    variants[1].budget["total_steps"] = 60
    variants[1].final = {**(variants[1].final or {}), "procedure_sha256": "q" * 64}
    data = ExperimentData("exp_2", "x", "", REFERENCE_CONFIG, variants)
    warnings = build_comparison(data).warnings
    assert any("rank-64" in w and "different procedure" in w for w in warnings)
    assert any("rank-64" in w and "seed 7" in w for w in warnings)
    assert any("rank-64" in w and "total_steps 60" in w for w in warnings)


def test_a_preference_experiment_compares_rewards_each_in_its_direction() -> None:
    from tunedeck.config.training import TrainingConfig
    from tunedeck.eval.experiment_report import VariantRun

    reference = {**REFERENCE_CONFIG, "task": "dpo"}
    full = TrainingConfig(**reference).to_json_dict()
    before = {"reward_accuracy": 0.5, "reward_margin": 0.0, "chosen_logp": -40.0, "rejected_logp": -41.0}
    after = {"reward_accuracy": 0.8, "reward_margin": 2.0, "chosen_logp": -42.0, "rejected_logp": -50.0}
    variant = VariantRun(
        job_id="job_dpo", name="dpo", state="succeeded", config=full,
        baseline={"metrics": before}, final={"metrics": {**after, "eval_loss": 0.4}},
    )  # fmt: skip
    data = ExperimentData(
        experiment_id="exp_2", name="dpo", hypothesis="DPO makes the chosen answer win.",
        reference_config=reference, variants=[variant],
        guards=parse_guards(["reward_accuracy >= baseline", "rejected_logp <= baseline", "chosen_logp >= baseline"]),
    )  # fmt: skip
    comparison = build_comparison(data)
    (summary,) = comparison.variants
    changes = {name: cell.change for name, cell in summary.metrics.items()}
    assert changes == {
        "reward_accuracy": "better",
        "reward_margin": "better",
        "chosen_logp": "worse",
        "rejected_logp": "better",
        "eval_loss": "",
    }
    assert [guard["passed"] for guard in summary.guards] == [True, True, False]
    markdown = comparison_markdown(comparison, embed_plot=False)
    assert all(name in markdown for name in ("reward_accuracy", "reward_margin", "chosen_logp", "rejected_logp"))


def test_a_variant_rendered_with_another_chat_template_is_flagged_not_compared_silently() -> None:
    variants = three_variants()
    variants[0].model = {"chat_template_sha256": "a" * 64}
    variants[1].model = {"chat_template_sha256": "b" * 64}
    comparison = build_comparison(ExperimentData("exp_3", "x", "", REFERENCE_CONFIG, variants))
    flags = {v.name: [flag.check for flag in v.procedure_flags] for v in comparison.variants}
    assert flags == {"reference": [], "rank-64": ["chat_template"], "lr-1e-2": []}
    assert any("rank-64" in w and "chat template" in w for w in comparison.warnings)
    markdown = comparison_markdown(comparison, embed_plot=False)
    assert "**chat_template**: rendered with another chat template than reference" in markdown


def test_defaults_written_differently_are_not_changes() -> None:
    from tunedeck.config.training import TrainingConfig
    from tunedeck.eval.experiment_report import VariantRun

    # The reference leaves mixed_precision and the batch split to their defaults (auto, 4 × 4);
    # the variants write them out as what they came to on the machine (bf16, 16 × 1).
    written = TrainingConfig(
        **REFERENCE_CONFIG, mixed_precision="bf16", batch_size=16, gradient_accumulation_steps=1
    ).to_json_dict()
    resolved = VariantRun("job_w", "written", "queued", written, derived={"resolved_precision": "bf16"})
    unresolved = VariantRun("job_u", "unresolved", "queued", written)
    partial = VariantRun("job_p", "partial", "queued", dict(REFERENCE_CONFIG))
    comparison = build_comparison(ExperimentData("exp_4", "x", "", REFERENCE_CONFIG, [resolved, unresolved, partial]))
    diffs = {v.name: v.config_diff for v in comparison.variants}
    assert diffs["written"] == {} and diffs["partial"] == {}
    # Without the run's record of what "auto" resolved to, the two are not known to be the same.
    assert diffs["unresolved"] == {"mixed_precision": ("auto", "bf16")}
    assert comparison.reference_job_id == "job_w"


def test_each_variants_training_data_is_shown_with_its_recorded_licence() -> None:
    variants = three_variants()
    data = [
        {"role": "train", "name": "faq", "version": 2, "sha256": "a" * 64, "rows": 90, "licence": "cc-by-4.0"},
        {"role": "validation", "name": "held-out", "version": 1, "sha256": "b" * 64, "rows": 30, "licence": None},
    ]
    for variant in variants:
        variant.data = [dict(entry) for entry in data]
    comparison = build_comparison(
        ExperimentData(
            experiment_id="exp_2", name="licences", hypothesis="", reference_config=REFERENCE_CONFIG, variants=variants
        )
    )
    shown = "train: faq v2 (licence: cc-by-4.0); validation: held-out v1 (licence: not recorded)"
    assert shown in comparison_markdown(comparison, embed_plot=False)
    assert shown in comparison_html(comparison)
    assert comparison.to_dict()["variants"][0]["data"][0]["licence"] == "cc-by-4.0"
