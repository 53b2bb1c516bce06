"""The rental plan's arithmetic: measured figures from a preflight report, estimates without one, the fit."""

from __future__ import annotations

import pytest

from tunedeck.core.errors import ConfigError
from tunedeck.planning.figures import Machine, measured_from_report, resolve_figures
from tunedeck.planning.peak_flops import device_peak
from tunedeck.planning.timeline import DAY_S, VariantWork, Workload, build_timeline

H100 = Machine("H100", 1)


def preflight_report(*, examples_per_second: float = 10.0, eval_seconds_per_row: float = 0.5) -> dict:
    """A preflight report as `PreflightReport.to_dict()` writes it, with the figures a plan reads."""
    return {
        "status": "pass",
        "ok": True,
        "seconds": 600.0,
        "hardware": {"backend": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "device_count": 1},
        "checks": [
            {"number": 6, "name": "checkpoint_cycle", "status": "pass", "seconds": 240.0, "figures": {}},
            {
                "number": 7,
                "name": "throughput",
                "status": "pass",
                "seconds": 90.0,
                "figures": {
                    "examples_per_second": examples_per_second,
                    "evaluation": {"seconds_per_row": eval_seconds_per_row},
                },
            },
        ],
    }


def workload(variants: int = 3, epochs: int = 2) -> Workload:
    return Workload(
        tuple(VariantWork(f"v{i}", train_rows=36_000, epochs=epochs) for i in range(1, variants + 1)),
        validation_rows=1_000,
        test_rows=2_000,
    )


def test_measured_figures_lay_out_the_phases_in_the_method_order() -> None:
    measured = measured_from_report(preflight_report(), "wi_1")
    figures = resolve_figures(H100, measured=measured, model_params=None, tokens_per_row=512)
    timeline = build_timeline(workload(), figures, margin_share=0.2, price_per_hour=2.5)

    assert [p.key for p in timeline.phases] == [
        "initial_check", "variant:v1", "variant:v2", "variant:v3", "final_evaluation", "resume_margin", "export",
    ]  # fmt: skip
    initial = timeline.phase("initial_check")
    assert initial.seconds == pytest.approx(600 + 1_000 * 0.5)  # the checks, then the baseline evaluation
    variant = timeline.phase("variant:v2")
    assert variant.seconds == pytest.approx(36_000 * 2 / 10 + 1_000 * 0.5)  # 7200 s training + 500 s evaluation
    assert variant.start_s == pytest.approx(timeline.phase("variant:v1").end_s)
    assert timeline.phase("final_evaluation").seconds == pytest.approx((1_000 + 2_000) * 0.5)
    assert timeline.phase("resume_margin").seconds == pytest.approx(240.0)
    assert not variant.estimated and timeline.phase("export").estimated  # exports are never measured
    assert timeline.estimated_figures == ("export_seconds",)
    total = timeline.total_seconds
    assert total == pytest.approx(sum(p.seconds for p in timeline.phases))
    assert timeline.needed_seconds == pytest.approx(total * 1.2)
    assert timeline.planned_cost == pytest.approx(total * 1.2 / 3600 * 2.5)
    assert timeline.shortest_rental_days == 3
    three = timeline.rentals[0]
    assert (three.days, three.fits, three.variants_that_fit, three.cost) == (3, True, 3, 3 * 24 * 2.5)


def test_the_shortest_rental_and_the_variants_that_fit_each_rental() -> None:
    measured = measured_from_report(preflight_report(examples_per_second=1.0), "wi_1")
    figures = resolve_figures(H100, measured=measured, model_params=None, tokens_per_row=512)
    # Each variant trains 36 000 rows × 2 epochs at 1 row/s: 20 h, plus 500 s of evaluation.
    timeline = build_timeline(workload(variants=8), figures, margin_share=0.2)

    fits = {fit.days: fit for fit in timeline.rentals}
    assert timeline.shortest_rental_days == 30
    assert (fits[3].fits, fits[7].fits, fits[30].fits) == (False, False, True)
    variant_s = timeline.phase("variant:v1").seconds
    fixed = timeline.total_seconds - 8 * variant_s
    for days in (3, 7):
        expected = int((days * DAY_S / 1.2 - fixed) // variant_s)
        assert fits[days].variants_that_fit == expected
    assert fits[3].variants_that_fit == 2 and fits[7].variants_that_fit == 6
    assert fits[30].variants_that_fit == 8
    assert fits[3].spare_seconds < 0 < fits[30].spare_seconds
    assert fits[3].cost is None  # no price given


def test_a_report_from_other_hardware_is_not_used() -> None:
    measured = measured_from_report(preflight_report(), "wi_1")
    figures = resolve_figures(Machine("A100", 1), measured=measured, model_params=7e9, tokens_per_row=512)
    assert all(figures.to_dict()[name]["source"] == "estimated" for name in figures.to_dict())


def test_a_failed_check_measured_nothing() -> None:
    report = preflight_report()
    report["checks"][1]["status"] = "fail"
    measured = measured_from_report(report, "wi_1")
    assert measured.examples_per_second is None and measured.checkpoint_cycle_seconds == 240.0


def test_estimates_from_model_size_and_tokens_at_the_stated_efficiency() -> None:
    figures = resolve_figures(Machine("H100", 8), measured=None, model_params=7e9, tokens_per_row=1_000, efficiency=0.4)

    sustained = 989e12 * 8 * 0.4
    train = figures.train_examples_per_second
    assert train.source == "estimated"
    assert train.value == pytest.approx(sustained / (6 * 7e9 * 1_000))
    assert "40% of 989 TFLOPS × 8" in train.basis and "datasheet" in train.basis
    evaluation = figures.eval_seconds_per_row
    assert evaluation.value == pytest.approx(2 * 7e9 * 1_000 / sustained)
    assert figures.estimated_names() == [
        "train_examples_per_second", "eval_seconds_per_row", "preflight_seconds", "reload_seconds", "export_seconds",
    ]  # fmt: skip
    assert figures.reload_seconds.value == pytest.approx(120 + 2 * 7e9 / 1e9)
    timeline = build_timeline(workload(variants=1, epochs=1), figures)
    assert timeline.phase("variant:v1").parts[0].seconds == pytest.approx(36_000 / train.value)


def test_estimating_without_the_model_size_says_what_is_missing() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_figures(H100, measured=None, model_params=None, tokens_per_row=512)
    assert raised.value.issues[0].field == "model_params"


def test_an_unknown_device_names_the_known_ones() -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_figures(Machine("TPU v5", 1), measured=None, model_params=1e9, tokens_per_row=512)
    issue = raised.value.issues[0]
    assert issue.field == "machine.device_type" and "H100" in (issue.expected or "")


@pytest.mark.parametrize(
    ("name", "key"),
    [("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A10G", "A10"), ("NVIDIA L40S", "L40S"), ("NVIDIA L4", "L4"),
     ("cpu", "CPU"), ("NVIDIA H200", "H200")],
)  # fmt: skip
def test_device_names_match_the_longest_key(name: str, key: str) -> None:
    assert device_peak(name).key == key
