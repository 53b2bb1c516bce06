"""LTTB keeps both ends and spikes, and never returns more points than asked."""

from __future__ import annotations

import math

import pytest

from tunedeck.store.downsample import lttb


def test_short_series_are_returned_whole() -> None:
    points = [(0, 1.0), (1, 2.0), (2, 0.5)]
    assert lttb(points, 10) == points


@pytest.mark.parametrize(("count", "limit"), [(10, 3), (1000, 50), (1001, 999), (5000, 100)])
def test_bounds_size_and_keeps_endpoints_in_order(count: int, limit: int) -> None:
    points = [(i, math.sin(i / 10)) for i in range(count)]
    sampled = lttb(points, limit)
    assert len(sampled) == limit
    assert sampled[0] == points[0] and sampled[-1] == points[-1]
    steps = [s for s, _ in sampled]
    assert steps == sorted(set(steps))
    assert set(sampled) <= set(points)


def test_a_single_spike_survives() -> None:
    points = [(i, 1.0) for i in range(2000)]
    points[777] = (777, 50.0)
    assert (777, 50.0) in lttb(points, 20)


def test_nan_values_do_not_break_sampling() -> None:
    points = [(i, math.nan if i % 7 == 0 else float(i)) for i in range(500)]
    sampled = lttb(points, 40)
    assert len(sampled) == 40 and sampled[-1][0] == 499


def test_too_few_points_requested_is_an_error() -> None:
    with pytest.raises(ValueError):
        lttb([(0, 0.0)] * 10, 2)
