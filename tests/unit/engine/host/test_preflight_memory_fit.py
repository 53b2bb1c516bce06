"""Memory fit from measured peaks: the line, the cap and margin, the accumulation that keeps the effective batch."""

from __future__ import annotations

import pytest

from tunedeck.config.loading import validate_config
from tunedeck.engine.host.memory_fit import MemoryPoint, decide_micro_batch, fit_line, split_effective_batch

MIB = 2**20


def test_line_through_two_peaks() -> None:
    base, slope = fit_line([MemoryPoint(4, 1000 * MIB), MemoryPoint(8, 1400 * MIB)])
    assert base == pytest.approx(600 * MIB)
    assert slope == pytest.approx(100 * MIB)


def test_a_negative_slope_is_noise_and_becomes_flat() -> None:
    assert fit_line([MemoryPoint(2, 510), MemoryPoint(4, 500)]) == (510, 0.0)


def test_cap_picks_the_largest_micro_batch_under_the_margin_and_keeps_the_effective_batch() -> None:
    points = [MemoryPoint(4, 1000 * MIB), MemoryPoint(8, 1400 * MIB)]  # 600 MiB + 100 MiB per example
    # usable = 1200 MiB × 0.9 = 1080 MiB → at most 4 examples (1000 MiB); 5 would need 1100 MiB.
    decision = decide_micro_batch(points, 1200 * MIB, 8, 2, safety_margin=0.10, cap_source="simulated")
    assert (decision.micro_batch, decision.accumulation) == (4, 4)
    assert decision.effective_batch == decision.requested_effective_batch == 16
    assert decision.exact and decision.fits and decision.changed
    assert decision.largest_fitting_micro_batch == 4
    data = decision.to_dict()
    assert data["projected_peak_bytes"] == pytest.approx(1000 * MIB)
    assert data["points"] == [
        {"micro_batch": 4, "peak_bytes": 1000 * MIB},
        {"micro_batch": 8, "peak_bytes": 1400 * MIB},
    ]
    assert "keeps the effective batch of 16" in data["explanation"]


def test_a_fitting_micro_batch_is_kept_and_never_raised() -> None:
    points = [MemoryPoint(1, 100), MemoryPoint(2, 110)]
    decision = decide_micro_batch(points, 10_000, 2, 4)
    assert (decision.micro_batch, decision.accumulation, decision.changed) == (2, 4, False)
    assert decision.largest_fitting_micro_batch == 8  # reported, capped at the effective batch


def test_nothing_fits_falls_back_to_micro_batch_one_and_says_so() -> None:
    decision = decide_micro_batch([MemoryPoint(1, 900), MemoryPoint(2, 1000)], 500, 4, 1)
    assert not decision.fits
    assert (decision.micro_batch, decision.accumulation) == (1, 4)
    assert "reduce max_length" in decision.explanation


def test_rounding_is_explained_when_no_good_divisor_exists() -> None:
    split = split_effective_batch(14, 6)  # divisors of 14 under 6: 1, 2 → too slow; 6 × 2 = 12
    assert (split.micro_batch, split.accumulation, split.exact) == (6, 2, False)
    decision = decide_micro_batch([MemoryPoint(7, 700), MemoryPoint(14, 1400)], int(600 / 0.9) + 1, 14, 1)
    assert decision.micro_batch == 6 and not decision.exact
    assert "instead of 14" in decision.explanation


def test_exact_split_halves_an_odd_micro_batch_through_a_divisor() -> None:
    assert split_effective_batch(3 * 4, 1, exact_only=True).micro_batch == 1
    split = split_effective_batch(6 * 2, 3, exact_only=True)
    assert (split.micro_batch, split.accumulation) == (3, 4)


def test_decision_applies_to_the_config() -> None:
    config = validate_config({"batch_size": 8, "gradient_accumulation_steps": 2})
    decision = decide_micro_batch([MemoryPoint(4, 1000 * MIB), MemoryPoint(8, 1400 * MIB)], 1200 * MIB, 8, 2)
    applied = decision.apply_to(config)
    assert (applied.batch_size, applied.gradient_accumulation_steps) == (4, 4)
    assert applied.learning_rate == config.learning_rate


def test_the_fit_never_goes_below_the_tasks_smallest_micro_batch() -> None:
    points = [MemoryPoint(2, 1000 * MIB), MemoryPoint(4, 1400 * MIB)]  # 600 MiB + 200 MiB per example
    # Without a floor micro-batch 1 would fit (800 MiB); kto's floor of 2 (1000 MiB) does not.
    assert decide_micro_batch(points, int(900 * MIB / 0.9), 4, 1).micro_batch == 1
    decision = decide_micro_batch(points, int(900 * MIB / 0.9), 4, 1, min_micro_batch=2)
    assert not decision.fits and decision.micro_batch == 2
    assert "micro-batch 2 (the smallest this task trains with)" in decision.explanation
    # 7 has no divisor between 2 and 3: an inexact split at the largest fitting size, never 1.
    split = decide_micro_batch(points, int(1250 * MIB / 0.9), 7, 1, min_micro_batch=2)
    assert split.fits and split.micro_batch == 3 and not split.exact
    with pytest.raises(ValueError, match="no micro-batch between 2 and 3"):
        split_effective_batch(7, 3, exact_only=True, min_micro_batch=2)
