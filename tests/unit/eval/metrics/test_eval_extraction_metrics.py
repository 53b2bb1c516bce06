"""Extraction metrics on hand-written model outputs, against hand-computed values."""

from __future__ import annotations

import json

import pytest

from tunedeck.core.errors import ConfigError
from tunedeck.eval.metrics import extraction_metrics, normalize_json_value, parse_json_object

SCHEMA = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
}
REFERENCES = [
    {"name": "Ada", "age": 36},
    {"name": "Bob", "age": 41},
    {"name": "Cy", "age": 7},
    {"name": "Dee", "age": 52},
    {"name": "Eve", "age": 29},
    {"name": "Fay", "age": 60},
]
PREDICTIONS = [
    '  {"age": 36.0, "name": "Ada"}\n',  # 0 valid (whitespace stripped), 36.0 == 36, key order ignored
    '```json\n{"name": "Bob", "age": 40}\n```',  # 1 valid, fenced, age wrong
    'Here is the JSON: {"name": "Cy", "age": 7}',  # 2 invalid: prose around the object
    '{"name": "Dee"}',  # 3 valid, age missing -> schema violation (required)
    '{"name": "Eve", "age": -29}',  # 4 valid, age wrong -> schema violation (minimum 0)
    '{"name": "Fay", "age": 60,',  # 5 invalid: truncated
]
# Hand computation over 6 examples:
#   valid JSON: 0, 1, 3, 4                    -> 4/6;  fenced: 1 -> 1/6
#   name present: 0, 1, 3, 4 -> 4/6; name matches: 0, 1, 3, 4 -> 4/6
#   age present: 0, 1, 4 -> 3/6;     age matches: 0 -> 1/6
#   all required present: 0, 1, 4 -> 3/6;      whole object equal: 0 -> 1/6
#   schema valid: 0, 1 (3 lacks age, 4 is negative, 2 and 5 are not JSON) -> 2/6


def test_rates_equal_the_hand_computation() -> None:
    report = extraction_metrics(PREDICTIONS, REFERENCES, required_fields=["name", "age"], schema=SCHEMA)

    assert report.num_examples == 6
    assert report.json_valid_rate == pytest.approx(4 / 6)
    assert report.fenced_rate == pytest.approx(1 / 6)
    assert report.fields["name"].present_rate == pytest.approx(4 / 6)
    assert report.fields["name"].exact_match == pytest.approx(4 / 6)
    assert report.fields["age"].present_rate == pytest.approx(3 / 6)
    assert report.fields["age"].exact_match == pytest.approx(1 / 6)
    assert report.fields["age"].support == 6
    assert report.all_required_present_rate == pytest.approx(3 / 6)
    assert report.object_exact_match == pytest.approx(1 / 6)
    assert report.schema_valid_rate == pytest.approx(2 / 6)


def test_per_example_details_say_what_went_wrong() -> None:
    examples = extraction_metrics(
        PREDICTIONS, REFERENCES, required_fields=["name", "age"], schema=SCHEMA
    ).examples

    assert examples[0].field_matches == {"name": True, "age": True} and examples[0].object_match
    assert examples[1].fenced and examples[1].field_matches == {"name": True, "age": False}
    assert not examples[2].json_valid and examples[2].missing_fields == ["name", "age"]
    assert examples[2].parse_error is not None and examples[2].parse_error.startswith("invalid JSON")
    assert examples[3].missing_fields == ["age"] and examples[3].schema_valid is False
    assert any("'age' is a required property" in error for error in examples[3].schema_errors)
    assert examples[4].schema_errors == ["age: -29 is less than the minimum of 0"]
    assert [example.schema_valid for example in examples] == [True, True, False, False, False, False]


def test_to_dict_is_json_ready_with_guard_addressable_fields() -> None:
    report = extraction_metrics(PREDICTIONS, REFERENCES, required_fields=["name", "age"], schema=SCHEMA)
    data = json.loads(json.dumps(report.to_dict()))

    assert data["fields"]["age"]["present_rate"] == pytest.approx(0.5)
    assert len(data["examples"]) == 6
    assert "examples" not in report.to_dict(include_examples=False)


def test_without_a_schema_no_schema_rate_is_reported() -> None:
    report = extraction_metrics(PREDICTIONS, REFERENCES, required_fields=["name", "age"])

    assert report.schema_valid_rate is None
    assert "schema_valid_rate" not in report.to_dict()
    assert all(example.schema_valid is None for example in report.examples)


def test_fences_can_be_refused() -> None:
    report = extraction_metrics(PREDICTIONS, REFERENCES, required_fields=["name", "age"], allow_fenced=False)

    assert report.json_valid_rate == pytest.approx(3 / 6)
    assert report.examples[1].parse_error == "fenced code block not allowed"


def test_reference_keys_beyond_the_required_ones_are_scored_but_not_required() -> None:
    # Field "city": reference 0 has it and the prediction matches, reference 1 has it and the
    # prediction omits it -> exact match 1/2 over support 2; present in 1 of 2 outputs.
    report = extraction_metrics(
        ['{"name": "A", "city": "Lyon"}', '{"name": "B"}'],
        [{"name": "A", "city": "Lyon"}, {"name": "B", "city": "Nice"}],
        required_fields=["name"],
    )

    assert list(report.fields) == ["name", "city"]
    assert report.fields["city"].to_dict() == {
        "required": False,
        "present_rate": 0.5,
        "exact_match": 0.5,
        "support": 2,
    }
    assert report.all_required_present_rate == 1.0


@pytest.mark.parametrize(
    ("text", "valid", "fenced"),
    [
        ('{"a": 1}', True, False),
        ('\n\t {"a": 1}  \n', True, False),
        ('```json\n{"a": 1}\n```', True, True),
        ('```\n{"a": 1}```', True, True),
        ('```json\n{"a": 1}\n```\nHope this helps', False, False),
        ("[1, 2]", False, False),
        ('"a string"', False, False),
        ('{"a": NaN}', False, False),
        ("", False, False),
    ],
)
def test_parsing_rules(text: str, valid: bool, fenced: bool) -> None:
    parsed = parse_json_object(text)

    assert (parsed.valid, parsed.fenced) == (valid, fenced)
    assert (parsed.error is None) == valid


def test_json_normalisation_equates_integral_floats_but_not_booleans() -> None:
    assert normalize_json_value({"b": [1.0, {"y": 2, "x": 1}], "a": None}) == normalize_json_value(
        {"a": None, "b": [1, {"x": 1, "y": 2.0}]}
    )
    assert normalize_json_value(True) != normalize_json_value(1)
    assert normalize_json_value("Ada ") != normalize_json_value("Ada")


def test_an_invalid_schema_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="json_schema"):
        extraction_metrics(['{"a": 1}'], [{"a": 1}], required_fields=["a"], schema={"type": 12})
