"""Guards ("what must not degrade"): parsing both forms, and their verdicts against the baseline."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tunedeck.core.errors import ConfigError
from tunedeck.eval.guards import (
    COMPACT_GUARD_SCHEMA,
    GUARD_FORM,
    GUARD_OBJECT_SCHEMA,
    Guard,
    evaluate_guard,
    evaluate_guards,
    parse_guards,
)
from tunedeck.eval.metrics import classification_metrics

BASELINE = {
    "eval_loss": 2.0,
    "accuracy": 0.40,
    "json_valid_rate": 0.90,
    "per_class": {"spam": {"f1": 0.30}},
    "fields": {"name": {"present_rate": 0.5}},
}
FINAL = {
    "eval_loss": 1.2,
    "accuracy": 0.85,
    "json_valid_rate": 0.80,
    "per_class": {"spam": {"f1": 0.75}, "v1.2": {"f1": 0.9}},
    "fields": {"name": {"present_rate": 0.95}},
    "confusion_matrix": {"matrix": [[3, 1], [0, 4]]},
    "note": "text",
}


GOOD_GUARDS = [
    ("per_class.spam.f1 >= 0.8", Guard("per_class.spam.f1", ">=", 0.8)),
    ("json_valid_rate >= baseline", Guard("json_valid_rate", ">=", "baseline")),
    ("json_valid_rate>=baseline-0.02", Guard("json_valid_rate", ">=", "baseline", 0.02)),
    ("eval_loss <= baseline + 0.05", Guard("eval_loss", "<=", "baseline", 0.05)),
    ("fields.name.present_rate ≥ 1", Guard("fields.name.present_rate", ">=", 1.0)),
    ("  eval_perplexity <= 20 ", Guard("eval_perplexity", "<=", 20.0)),
]
BAD_GUARDS = [
    ("accuracy > 0.8", "cannot read this guard"),
    ("accuracy >=", "cannot read this guard"),
    (">= 0.8", "cannot read this guard"),
    ("acc uracy >= 0.8", "cannot read this guard"),
    ("accuracy >= high", "neither a number nor 'baseline'"),
    ("accuracy >= inf", "neither a number nor 'baseline'"),
    ("accuracy >= baseline + 0.1", "write '>= baseline - 0.1'"),
    ("eval_loss <= baseline - 0.1", "write '<= baseline \\+ 0.1'"),
    ("accuracy >= baseline - lots", "not a number >= 0"),
    ("eval_loss >= baseline", "lower-is-better"),
    ("eval_mean_loss >= baseline - 0.1", "lower-is-better"),
    ("test.perplexity ≥ 2", "lower-is-better"),
    ("per_class..f1 >= 0.5", "dotted path"),
]


@pytest.mark.parametrize(("text", "expected"), GOOD_GUARDS)
def test_compact_form_is_parsed_and_written_back(text: str, expected: Guard) -> None:
    guard = Guard.parse(text)

    assert guard == expected
    assert Guard.parse(str(guard)) == guard
    assert Guard.from_json(json.loads(json.dumps(guard.to_dict()))) == guard


@pytest.mark.parametrize(("text", "reason"), BAD_GUARDS)
def test_bad_guard_strings_name_the_text_and_the_expected_form(text: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as caught:
        Guard.parse(text)

    message = str(caught.value)
    assert repr(text) in message
    assert GUARD_FORM in message


def test_the_json_schema_of_both_forms_agrees_with_the_parser() -> None:
    compact = Draft202012Validator(COMPACT_GUARD_SCHEMA)
    assert all(compact.is_valid(text) for text, _ in GOOD_GUARDS)
    assert not any(compact.is_valid(text) for text, _ in BAD_GUARDS)
    objects = Draft202012Validator(GUARD_OBJECT_SCHEMA)
    assert all(objects.is_valid(guard.to_dict()) for _, guard in GOOD_GUARDS)
    assert not objects.is_valid({"metric": "loss", "comparator": ">=", "threshold": 1})
    assert not objects.is_valid({"metric": "eval_gen_perplexity", "comparator": ">=", "threshold": 1})
    assert objects.is_valid({"metric": "lossless_rate", "comparator": ">=", "threshold": 1})
    # A comparator sign in a metric path could not be read back from the compact form a job keeps.
    signed = {"metric": "a<b", "comparator": ">=", "threshold": 1}
    assert not objects.is_valid(signed)
    with pytest.raises(ConfigError, match="dotted path"):
        Guard.from_json(signed)


def test_json_form_errors_are_reported_per_entry() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_guards(
            [
                "accuracy >= 0.5",
                {"metric": "accuracy"},
                {"metric": "accuracy", "comparator": ">=", "threshold": 0.5, "margin": 1},
                {"metric": "accuracy", "comparator": ">=", "threshold": True},
                {"metric": "accuracy", "comparator": ">=", "threshold": "baseline", "tolerance": -1},
                "accuracy => 0.5",
            ]
        )

    fields = [issue.field for issue in caught.value.issues]
    assert fields == ["guards[1]", "guards[2]", "guards[3]", "guards[4]", "guards[5]"]
    messages = [issue.message for issue in caught.value.issues]
    assert "missing keys ['comparator', 'threshold']" in messages[0]
    assert "unknown keys ['margin']" in messages[1]
    assert 'finite number or "baseline"' in messages[2]
    assert "tolerance must be a number >= 0" in messages[3]


def test_a_drop_below_baseline_is_flagged_with_both_values() -> None:
    result = evaluate_guard(Guard.parse("json_valid_rate >= baseline"), FINAL, BASELINE)

    assert result.violated
    assert (result.value, result.baseline, result.bound) == (0.80, 0.90, 0.90)
    assert result.reason == "json_valid_rate = 0.8 < baseline 0.9: violated"


def test_a_tolerance_absorbs_a_small_drop() -> None:
    result = evaluate_guard(Guard.parse("json_valid_rate >= baseline - 0.15"), FINAL, BASELINE)

    assert result.passed
    assert result.bound == pytest.approx(0.75)


def test_verdicts_on_a_mixed_list_keep_their_order() -> None:
    guards = parse_guards(
        [
            "accuracy >= baseline",  # 0.85 >= 0.40
            "eval_loss <= baseline",  # 1.2 <= 2.0
            "per_class.spam.f1 >= 0.8",  # 0.75 < 0.8
            "fields.name.present_rate >= baseline",  # 0.95 >= 0.5
            "per_class.v1.2.f1 >= 0.85",  # label with a dot: 0.9
            "confusion_matrix.matrix.1.1 >= 4",  # list indices
        ]
    )
    results = evaluate_guards(guards, FINAL, BASELINE)

    assert [result.passed for result in results] == [True, True, False, True, True, True]
    assert results[2].reason == "per_class.spam.f1 = 0.75 < 0.8: violated"
    assert json.loads(json.dumps([result.to_dict() for result in results]))[2]["value"] == 0.75


def test_guards_read_a_real_classification_report() -> None:
    # spam: predicted twice, right once (P = 1/2); two true spams, one found (R = 1/2) -> F1 = 1/2.
    report = classification_metrics(["spam", "spam", "ham"], ["spam", "ham", "spam"], ["spam", "ham"])
    result = evaluate_guard(Guard.parse("per_class.spam.f1 >= 0.5"), report.to_dict())

    assert result.passed and result.value == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("text", "final", "baseline", "reason"),
    [
        (
            "per_class.promo.f1 >= 0.5",
            FINAL,
            BASELINE,
            "no key 'promo' under 'per_class' (available: spam, v1.2)",
        ),
        ("recall >= 0.5", FINAL, BASELINE, "'recall' missing from the final metrics"),
        ("accuracy >= baseline", FINAL, None, "no baseline metrics"),
        ("per_class.v1.2.f1 >= baseline", FINAL, BASELINE, "missing from the baseline metrics"),
        ("per_class.spam >= 0.5", FINAL, BASELINE, "not a number"),
        ("note >= 0.5", FINAL, BASELINE, "not a number"),
        ("accuracy.top >= 0.5", FINAL, BASELINE, "'accuracy' is a float, not a group of metrics"),
        ("confusion_matrix.matrix.7.0 >= 1", FINAL, BASELINE, "'7' is not an index"),
        ("accuracy >= 0.5", {"accuracy": math.nan}, BASELINE, "is NaN"),
        ("accuracy >= 0.5", {"accuracy": True}, BASELINE, "not a number"),
    ],
)
def test_anything_missing_is_a_violation_with_a_reason_not_a_crash(
    text: str, final: dict[str, Any], baseline: dict[str, Any] | None, reason: str
) -> None:
    result = evaluate_guard(Guard.parse(text), final, baseline)

    assert result.violated
    assert reason in result.reason


def test_float_noise_is_not_a_degradation() -> None:
    result = evaluate_guard(Guard.parse("accuracy >= baseline"), {"accuracy": 0.1 + 0.2}, {"accuracy": 0.3})
    assert result.passed
    below = evaluate_guard(Guard.parse("accuracy >= baseline"), {"accuracy": 0.2999}, {"accuracy": 0.3})
    assert below.violated


PREFERENCE_BASELINE = {"reward_accuracy": 0.5, "reward_margin": 0.0, "chosen_logp": -40.0, "rejected_logp": -41.0}
PREFERENCE_FINAL = {"reward_accuracy": 0.75, "reward_margin": 1.5, "chosen_logp": -38.0, "rejected_logp": -45.0}


def test_preference_guards_hold_each_metric_to_its_direction() -> None:
    guards = parse_guards(
        [
            "reward_accuracy >= baseline",
            "reward_margin >= baseline",
            "chosen_logp >= baseline - 1",
            "rejected_logp <= baseline",
        ]
    )
    results = evaluate_guards(guards, PREFERENCE_FINAL, PREFERENCE_BASELINE)
    assert [result.passed for result in results] == [True, True, True, True]
    worse = {**PREFERENCE_FINAL, "reward_accuracy": 0.4, "rejected_logp": -39.0}
    verdicts = evaluate_guards(guards, worse, PREFERENCE_BASELINE)
    assert [result.passed for result in verdicts] == [False, True, True, False]
    assert verdicts[3].reason == "rejected_logp = -39 > baseline -41: violated"


@pytest.mark.parametrize("metric", ["rejected_logp", "eval_rejected_logp", "logps/rejected", "eval_rewards/rejected"])
def test_a_guard_that_forbids_the_rejected_answer_becoming_less_likely_is_refused(metric: str) -> None:
    with pytest.raises(ConfigError, match="lower-is-better"):
        Guard.parse(f"{metric} >= baseline")
    assert not Draft202012Validator(COMPACT_GUARD_SCHEMA).is_valid(f"{metric} >= baseline")
    assert not Draft202012Validator(GUARD_OBJECT_SCHEMA).is_valid(
        {"metric": metric, "comparator": ">=", "threshold": "baseline"}
    )
    assert Draft202012Validator(COMPACT_GUARD_SCHEMA).is_valid(f"{metric} <= baseline + 0.5")
