"""Tracking a started rental against its plan, with the clock under the test's control."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tunedeck.planning.figures import Figure, PlanFigures
from tunedeck.planning.timeline import VariantWork, Workload, build_timeline
from tunedeck.planning.tracking import VariantRun, track

START = datetime(2027, 3, 1, 8, 0, tzinfo=UTC)
HOUR = 3600.0


def measured(value: float, unit: str) -> Figure:
    return Figure(value, unit, "measured", "fixture")


def timeline():
    """Initial check 1 h; variants a, b, c of 20 h training + 1 h evaluation each; final 2 h; reload 1 h; export 1 h."""
    figures = PlanFigures(
        train_examples_per_second=measured(1.0, "rows/s"),
        eval_seconds_per_row=measured(1.0, "s/row"),
        preflight_seconds=measured(0.0, "s"),
        reload_seconds=measured(HOUR, "s"),
        export_seconds=measured(HOUR, "s"),
    )
    work = Workload(
        tuple(VariantWork(name, train_rows=36_000, epochs=2) for name in ("a", "b", "c")),
        validation_rows=3_600,
        test_rows=3_600,
    )
    return build_timeline(work, figures, margin_share=0.0)


def test_on_pace_the_plan_ends_when_planned_and_nothing_is_said() -> None:
    plan = timeline()
    now = START + timedelta(hours=11)
    runs = {"a": VariantRun("a", "job_a", "running", started_at=START + timedelta(hours=1), step=50, total_steps=100)}
    tracking = track(plan, started_at=START, rental_days=3, runs=runs, now=now)

    by_key = {phase.key: phase for phase in tracking.phases}
    assert by_key["initial_check"].status == "done"
    a = by_key["variant:a"]
    assert a.status == "running" and a.fraction == 0.5
    assert a.projected_end == START + timedelta(hours=22)  # 10 h for half the steps, 10 h more, then 1 h evaluation
    assert a.projected_end == a.planned_end
    assert tracking.projected_end == START + timedelta(seconds=plan.total_seconds)
    assert not tracking.late and tracking.warnings == () and tracking.advice == ()


def test_a_slow_variant_warns_and_says_to_drop_the_last_variants_not_started_first() -> None:
    plan = timeline()
    # Variant a has done 10 % of its steps in 10 h: 90 h more at that pace, far past the 3 days.
    now = START + timedelta(hours=11)
    runs = {"a": VariantRun("a", "job_a", "running", started_at=START + timedelta(hours=1), step=10, total_steps=100)}
    tracking = track(plan, started_at=START, rental_days=3, runs=runs, now=now)

    a = next(phase for phase in tracking.phases if phase.key == "variant:a")
    assert a.projected_end == now + timedelta(hours=90 + 1)
    assert tracking.late
    assert tracking.warnings and "after the rental ends" in tracking.warnings[0]
    assert "Variant a" in tracking.warnings[0]  # the first phase that ends too late
    assert tracking.advice[0].startswith("drop variant c")
    assert tracking.advice[1].startswith("drop variant b")
    assert tracking.advice[2].startswith("fewer epochs for a")


def test_dropping_one_variant_is_enough_when_the_overrun_is_small() -> None:
    plan = timeline()
    # Variant a runs 25 % slower than planned: 5 h late on a 3-day rental (72 h) the plan fills to 68 h.
    now = START + timedelta(hours=21)
    runs = {"a": VariantRun("a", "job_a", "running", started_at=START + timedelta(hours=1), step=80, total_steps=100)}
    tracking = track(plan, started_at=START, rental_days=3, runs=runs, now=now)

    assert plan.total_seconds == 68 * HOUR
    assert tracking.projected_end == START + timedelta(hours=73)
    assert tracking.late
    assert tracking.advice == ("drop variant c (saves 21h 00m)",)


def test_ended_variants_count_at_their_finish_and_later_phases_start_no_earlier_than_now() -> None:
    plan = timeline()
    finished = START + timedelta(hours=15)  # a took 14 h instead of 21 h
    runs = {"a": VariantRun("a", "job_a", "succeeded", started_at=START + timedelta(hours=1), finished_at=finished)}
    now = START + timedelta(hours=40)  # b never started: the clock ran on
    tracking = track(plan, started_at=START, rental_days=7, runs=runs, now=now)

    by_key = {phase.key: phase for phase in tracking.phases}
    assert by_key["variant:a"].status == "done" and by_key["variant:a"].projected_end == finished
    assert by_key["variant:b"].status == "waiting"
    assert by_key["variant:b"].projected_end == now + timedelta(hours=21)
    assert not tracking.late  # 7 days hold it
    late = track(plan, started_at=START, rental_days=3, runs=runs, now=now)
    assert late.late and late.advice[0].startswith("drop variant c")


def test_when_dropping_the_waiting_variants_is_not_enough_the_running_one_trains_fewer_epochs() -> None:
    plan = timeline()
    # Variant a: 10 % of its steps in 10 h, so 90 h to go; b and c (21 h each) are not enough to drop.
    now = START + timedelta(hours=11)
    runs = {"a": VariantRun("a", "job_a", "running", started_at=START + timedelta(hours=1), step=10, total_steps=100)}
    tracking = track(plan, started_at=START, rental_days=3, runs=runs, now=now)

    # The plan ends at 11 + 90 + 1 + 21 + 21 + 2 + 1 + 1 = 148 h: 76 h over; dropping b and c saves 42 h,
    # so a must lose 34 of its 90 h to go: 56 h of 90 kept, with 10 % done, is 0.1 + 0.9 × 56/90 = 66 % of 2 epochs.
    assert tracking.projected_end == START + timedelta(hours=148)
    assert tracking.advice == (
        "drop variant c (saves 21h 00m)",
        "drop variant b (saves 21h 00m)",
        "fewer epochs for a: about 1 of its 2 epochs fit (saves 1d 10h)",
    )
