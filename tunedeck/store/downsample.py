"""Downsampling long metric series for charts: Largest-Triangle-Three-Buckets (LTTB).

LTTB keeps the first and last points and, from each bucket in between, the point
that forms the largest triangle with its neighbours, so spikes (a loss blow-up)
survive where averaging would flatten them.
"""

from __future__ import annotations

from collections.abc import Sequence

Point = tuple[int, float]


def lttb(points: Sequence[Point], max_points: int) -> list[Point]:
    """At most `max_points` of `points` (sorted by step), always including the first and the last."""
    if max_points < 3:
        raise ValueError("max_points must be at least 3 (both ends and one point between)")
    count = len(points)
    if count <= max_points:
        return list(points)
    sampled = [points[0]]
    bucket_size = (count - 2) / (max_points - 2)
    previous = points[0]
    for bucket in range(max_points - 2):
        start = int(bucket * bucket_size) + 1
        end = int((bucket + 1) * bucket_size) + 1
        # The average of the next bucket stands in for the point that will be picked there.
        next_start = end
        next_end = min(int((bucket + 2) * bucket_size) + 1, count)
        following = points[next_start:next_end] or [points[-1]]
        avg_x = sum(p[0] for p in following) / len(following)
        avg_y = sum(p[1] for p in following) / len(following)
        best = points[start]
        best_area = -1.0
        for candidate in points[start:end]:
            area = abs(
                (previous[0] - avg_x) * (candidate[1] - previous[1])
                - (previous[0] - candidate[0]) * (avg_y - previous[1])
            )
            if area > best_area:
                best_area = area
                best = candidate
        sampled.append(best)
        previous = best
    sampled.append(points[-1])
    return sampled
