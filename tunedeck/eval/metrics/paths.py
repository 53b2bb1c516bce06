"""Dotted paths into a nested metrics mapping: `per_class.spam.f1`, `fields.name.present_rate`.

Label and field names may themselves contain dots ("v1.2"), so at each level the
longest run of segments that names an existing key wins, and shorter runs are
tried when that branch does not lead to the end of the path. A segment made of
digits indexes a list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Keys listed in a "not found" reason; longer lists are cut to keep messages readable.
_MAX_KEYS_SHOWN = 12


@dataclass(frozen=True)
class MetricLookup:
    """The value at a metric path, or why there is none."""

    found: bool
    value: Any = None
    reason: str | None = None


def resolve_metric(metrics: Mapping[str, Any], path: str) -> MetricLookup:
    """Follow `path` into `metrics`; a missing step is reported, never raised."""
    return _walk(metrics, path.split("."), [])


def _describe(walked: list[str]) -> str:
    return "'" + ".".join(walked) + "'" if walked else "the top level"


def _walk(node: Any, segments: list[str], walked: list[str]) -> MetricLookup:
    if not segments:
        return MetricLookup(True, node)
    if isinstance(node, Mapping):
        first_failure: MetricLookup | None = None
        for size in range(len(segments), 0, -1):
            key = ".".join(segments[:size])
            if key in node:
                result = _walk(node[key], segments[size:], [*walked, key])
                if result.found:
                    return result
                first_failure = first_failure or result
        if first_failure is not None:
            return first_failure
        keys = sorted(str(key) for key in node)
        shown = ", ".join(keys[:_MAX_KEYS_SHOWN]) + (", ..." if len(keys) > _MAX_KEYS_SHOWN else "")
        return MetricLookup(
            False, reason=f"no key '{segments[0]}' under {_describe(walked)} (available: {shown or 'none'})"
        )
    if isinstance(node, Sequence) and not isinstance(node, str):
        segment = segments[0]
        if segment.isdigit() and int(segment) < len(node):
            return _walk(node[int(segment)], segments[1:], [*walked, segment])
        return MetricLookup(
            False, reason=f"'{segment}' is not an index of {_describe(walked)} (a list of {len(node)})"
        )
    return MetricLookup(
        False, reason=f"{_describe(walked)} is a {type(node).__name__}, not a group of metrics"
    )
