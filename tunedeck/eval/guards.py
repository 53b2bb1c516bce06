"""Guards: what must not degrade (the experiment method), checked on the final metrics against the baseline.

A guard names a metric path (`accuracy`, `per_class.spam.f1`, `json_valid_rate`,
`fields.name.present_rate`), a comparator (`>=` or `<=`) and a bound: a number,
or `baseline` — the value the untrained starting model reached, optionally with a
tolerance that loosens the bound in the direction of degradation.

Compact form, as typed in a form or the CLI:

    per_class.spam.f1 >= 0.8
    json_valid_rate >= baseline
    json_valid_rate >= baseline - 0.02
    eval_loss <= baseline + 0.05

JSON form: `{"metric": "json_valid_rate", "comparator": ">=", "threshold":
"baseline", "tolerance": 0.02}` (`tolerance` optional, default 0). A guard is
never an exception at evaluation time: a missing metric, a missing baseline or a
value that is not a number is a violation whose reason says what was missing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.metric_direction import LOWER_IS_BETTER_PATTERN, LOWER_IS_BETTER_WORDS, lower_is_better
from tunedeck.eval.metrics.paths import resolve_metric

Comparator = Literal[">=", "<="]
BASELINE = "baseline"
GUARD_FORM = (
    "'METRIC >= NUMBER', 'METRIC <= NUMBER', 'METRIC >= baseline [- TOLERANCE]' or "
    "'METRIC <= baseline [+ TOLERANCE]', e.g. 'per_class.spam.f1 >= 0.8'"
)
JSON_FORM = '{"metric": "...", "comparator": ">=" or "<=", "threshold": NUMBER or "baseline", "tolerance": NUMBER}'
# Metrics computed twice from the same outputs can differ in the last bits (summation order);
# such differences are not degradations.
FLOAT_NOISE = 1e-9

_COMPACT = re.compile(
    r"^\s*(?P<metric>[^\s<>=≥≤]+)\s*(?P<op>>=|<=|≥|≤)\s*"
    r"(?:(?P<baseline>baseline)(?:\s*(?P<sign>[+-])\s*(?P<tolerance>\S+))?|(?P<number>\S+))\s*$"
)
# No comparator sign in a metric path, in either form: a guard is stored in compact form and read back.
# \x1c-\x1f and \x85 are spaces to Python but not to JSON Schema's regular expressions: named for both.
_METRIC_SEGMENT = r"[^\s.<>=≥≤\x1c-\x1f\x85]+"
_METRIC = rf"{_METRIC_SEGMENT}(?:\.{_METRIC_SEGMENT})*"
_METRIC_PATH = re.compile(rf"^{_METRIC}$")

# The guard forms as JSON Schema states them (the OpenAPI document); stricter than the parser in places
# (a number has at most 15 digits before and after the point and a two-digit exponent, so it is always
# finite), never looser. Whitespace outside a metric path is spaces and tabs.
_UNSIGNED = r"(?:[0-9]{1,15}(?:\.[0-9]{0,15})?|\.[0-9]{1,15})(?:[eE][+-]?[0-9]{1,2})?"
_NUMBER = rf"[+-]?{_UNSIGNED}"
_AT_LEAST = rf"(?:>=|≥)[ \t]*(?:baseline(?:[ \t]*-[ \t]*{_UNSIGNED})?|{_NUMBER})"
_AT_MOST = rf"(?:<=|≤)[ \t]*(?:baseline(?:[ \t]*\+[ \t]*{_UNSIGNED})?|{_NUMBER})"
COMPACT_GUARD_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": rf"^[ \t]*{_METRIC}[ \t]*(?:{_AT_LEAST}|{_AT_MOST})[ \t]*$",
    # Improving a lower-is-better metric is never what a guard forbids.
    "not": {"type": "string", "pattern": rf"^[ \t]*(?:{_METRIC}[._])?{LOWER_IS_BETTER_WORDS}[ \t]*(?:>=|≥)"},
    "description": f"A guard: {GUARD_FORM}.",
}
GUARD_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["metric", "comparator", "threshold"],
    "additionalProperties": False,
    "properties": {
        "metric": {"type": "string", "pattern": rf"^{_METRIC}$"},
        "comparator": {"enum": [">=", "<="]},
        "threshold": {"anyOf": [{"type": "number"}, {"const": BASELINE}]},
        "tolerance": {"type": "number", "minimum": 0},
    },
    "not": {
        "required": ["metric", "comparator"],
        "properties": {"metric": {"pattern": LOWER_IS_BETTER_PATTERN}, "comparator": {"const": ">="}},
    },
    "description": f"A guard: {JSON_FORM}.",
}


def _guard_error(message: str, found: Any, where: str, expected: str = GUARD_FORM) -> ConfigError:
    return ConfigError(
        [Issue(message=message, field=where, expected=expected, found=repr(found))], title="invalid guard"
    )


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Guard:
    """One "must not degrade" rule: `metric comparator threshold`, loosened by `tolerance`."""

    metric: str
    comparator: Comparator
    threshold: float | Literal["baseline"]
    tolerance: float = 0.0

    def __post_init__(self) -> None:
        where = f"guard on {self.metric!r}"
        if not isinstance(self.metric, str) or not _METRIC_PATH.match(self.metric):
            raise _guard_error("the metric must be a dotted path without spaces", self.metric, where)
        if self.comparator not in (">=", "<="):
            raise _guard_error("the comparator must be >= or <=", self.comparator, where)
        threshold_ok = self.threshold == BASELINE or (
            isinstance(self.threshold, int | float)
            and not isinstance(self.threshold, bool)
            and math.isfinite(self.threshold)
        )
        if not threshold_ok:
            raise _guard_error('the threshold must be a finite number or "baseline"', self.threshold, where)
        if (
            isinstance(self.tolerance, bool)
            or not isinstance(self.tolerance, int | float)
            or not math.isfinite(self.tolerance)
            or self.tolerance < 0
        ):
            raise _guard_error("the tolerance must be a number >= 0", self.tolerance, where)
        if lower_is_better(self.metric) and self.comparator == ">=":
            # "loss must not go down" is never what a person means; say so instead of guarding it.
            raise _guard_error(
                f"{self.metric} is lower-is-better, so '>=' would forbid improving it; use '<='",
                str(self),
                where,
            )

    @property
    def uses_baseline(self) -> bool:
        """True when the bound is the baseline's value."""
        return self.threshold == BASELINE

    @classmethod
    def parse(cls, text: str, *, where: str = "guard") -> Guard:
        """Read the compact form (module docstring); bad text raises ConfigError naming it."""
        if not isinstance(text, str):
            raise _guard_error("a guard must be a string", text, where)
        match = _COMPACT.match(text)
        if match is None:
            raise _guard_error(
                "cannot read this guard: it needs a metric path, then >= or <=, then a number or 'baseline'",
                text,
                where,
            )
        op: Comparator = ">=" if match["op"] in (">=", "≥") else "<="
        if match["baseline"] is None:
            number = _number(match["number"])
            if number is None:
                raise _guard_error(f"{match['number']!r} is neither a number nor 'baseline'", text, where)
            return _construct(match["metric"], op, number, 0.0, where, GUARD_FORM, repr(text))
        tolerance = 0.0
        if match["tolerance"] is not None:
            parsed = _number(match["tolerance"])
            if parsed is None or parsed < 0:
                raise _guard_error(f"the tolerance {match['tolerance']!r} is not a number >= 0", text, where)
            loosening = "-" if op == ">=" else "+"
            if match["sign"] != loosening:
                raise _guard_error(
                    f"a tolerance loosens the bound: write '{op} baseline {loosening} {match['tolerance']}'",
                    text,
                    where,
                )
            tolerance = parsed
        return _construct(match["metric"], op, BASELINE, tolerance, where, GUARD_FORM, repr(text))

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str, *, where: str = "guard") -> Guard:
        """Read the JSON object form, or a compact string found where JSON was expected."""
        if isinstance(data, str):
            return cls.parse(data, where=where)
        if not isinstance(data, Mapping):
            raise _guard_error("a guard must be an object or a string", data, where, JSON_FORM)
        unknown = sorted(set(data) - {"metric", "comparator", "threshold", "tolerance"})
        missing = [key for key in ("metric", "comparator", "threshold") if key not in data]
        if unknown or missing:
            problems = [f"unknown keys {unknown}"] if unknown else []
            problems += [f"missing keys {missing}"] if missing else []
            raise _guard_error("; ".join(problems), dict(data), where, JSON_FORM)
        return _construct(
            data["metric"],
            data["comparator"],
            data["threshold"],
            data.get("tolerance", 0.0),
            where,
            JSON_FORM,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form, readable back by `from_json`."""
        return {
            "metric": self.metric,
            "comparator": self.comparator,
            "threshold": self.threshold,
            "tolerance": self.tolerance,
        }

    def __str__(self) -> str:
        """Compact form, readable back by `parse`."""
        if not self.uses_baseline:
            return f"{self.metric} {self.comparator} {self.threshold:g}"
        if self.tolerance == 0:
            return f"{self.metric} {self.comparator} baseline"
        sign = "-" if self.comparator == ">=" else "+"
        return f"{self.metric} {self.comparator} baseline {sign} {self.tolerance:g}"


def _construct(
    metric: Any,
    comparator: Any,
    threshold: Any,
    tolerance: Any,
    where: str,
    expected: str,
    found: str | None = None,
) -> Guard:
    try:
        return Guard(metric, comparator, threshold, tolerance)
    except ConfigError as error:
        # Re-located so a list of guards says which entry is wrong, quoting the text as it was written.
        raise ConfigError(
            [Issue(message=i.message, field=where, expected=expected, found=found or i.found) for i in error.issues],
            title="invalid guard",
        ) from error


def parse_guards(specs: Sequence[str | Mapping[str, Any]]) -> list[Guard]:
    """Read a list of guards in either form, reporting every bad entry at once as `guards[i]`."""
    guards: list[Guard] = []
    issues: list[Issue] = []
    for index, spec in enumerate(specs):
        try:
            guards.append(Guard.from_json(spec, where=f"guards[{index}]"))
        except ConfigError as error:
            issues.extend(error.issues)
    if issues:
        raise ConfigError(issues, title="invalid guards")
    return guards


@dataclass(frozen=True)
class GuardResult:
    """The verdict of one guard: the values compared, and why it failed when it did."""

    guard: Guard
    passed: bool
    value: float | None
    bound: float | None
    baseline: float | None
    reason: str

    @property
    def violated(self) -> bool:
        """True when the guard failed (including a missing metric or baseline)."""
        return not self.passed

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for reports."""
        return {
            "guard": str(self.guard),
            **self.guard.to_dict(),
            "passed": self.passed,
            "value": self.value,
            "bound": self.bound,
            "baseline": self.baseline,
            "reason": self.reason,
        }


def _numeric(metrics: Mapping[str, Any] | None, path: str, source: str) -> tuple[float | None, str | None]:
    if metrics is None:
        return None, f"no {source} metrics to read {path!r} from"
    lookup = resolve_metric(metrics, path)
    if not lookup.found:
        return None, f"{path!r} missing from the {source} metrics: {lookup.reason}"
    value = lookup.value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"{path!r} in the {source} metrics is not a number (found {value!r})"
    if math.isnan(value):
        return None, f"{path!r} in the {source} metrics is NaN"
    return float(value), None


def evaluate_guard(
    guard: Guard, final_metrics: Mapping[str, Any], baseline_metrics: Mapping[str, Any] | None = None
) -> GuardResult:
    """Check one guard; problems become a failed result with a reason, never an exception."""
    value, problem = _numeric(final_metrics, guard.metric, "final")
    baseline: float | None = None
    anchor: float | None
    if isinstance(guard.threshold, str):
        baseline, baseline_problem = _numeric(baseline_metrics, guard.metric, "baseline")
        problem = problem or baseline_problem
        anchor = baseline
    else:
        anchor = float(guard.threshold)
    if anchor is None or value is None or problem is not None:
        bound = None if anchor is None else _loosen(guard, anchor)
        return GuardResult(guard, False, value, bound, baseline, problem or "no value to compare")
    bound = _loosen(guard, anchor)
    passed = value >= bound - FLOAT_NOISE if guard.comparator == ">=" else value <= bound + FLOAT_NOISE
    # Short numbers read best, but never so short that a violation prints as "0.9 < 0.9".
    show = repr if f"{value:.6g}" == f"{bound:.6g}" else (lambda number: f"{number:.6g}")
    named_bound = f"baseline {show(anchor)}" if guard.uses_baseline else show(bound)
    if guard.uses_baseline and guard.tolerance:
        named_bound += f" (bound {show(bound)} with tolerance {guard.tolerance:g})"
    relation = guard.comparator if passed else ("<" if guard.comparator == ">=" else ">")
    reason = f"{guard.metric} = {show(value)} {relation} {named_bound}"
    return GuardResult(guard, passed, value, bound, baseline, reason if passed else f"{reason}: violated")


def _loosen(guard: Guard, anchor: float) -> float:
    return anchor - guard.tolerance if guard.comparator == ">=" else anchor + guard.tolerance


def evaluate_guards(
    guards: Sequence[Guard],
    final_metrics: Mapping[str, Any],
    baseline_metrics: Mapping[str, Any] | None = None,
) -> list[GuardResult]:
    """Check every guard against the final metrics (and the baseline's), in the given order."""
    return [evaluate_guard(guard, final_metrics, baseline_metrics) for guard in guards]
