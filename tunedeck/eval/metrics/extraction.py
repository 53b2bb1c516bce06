"""Structured-extraction metrics: format validity and required fields first (the experiment method).

What counts as valid JSON output (the parsing rules, documented once here):

- The whole generated text, once surrounding whitespace is stripped, must be one
  JSON object (`{...}`). Arrays, strings, numbers and text around the object
  ("Here is the JSON: {...}") are invalid: a consumer of the model would have to
  guess where the object starts.
- A single fenced code block that is the entire output (three backticks, an
  optional `json` language tag, the object, three closing backticks) is accepted,
  because chat models emit it habitually and it is unambiguous to strip. Each
  example records whether it was fenced and `fenced_rate` reports how often, so a
  task that forbids fences can guard `fenced_rate <= 0`. Pass `allow_fenced=False`
  to count fenced output as invalid instead.
- Strict JSON only: `NaN`, `Infinity` and `-Infinity` are refused.

Field rules:

- A field is *present* when the object has the key, whatever its value (`null`
  included), matching JSON Schema's `required`. Only top-level keys are checked.
- A field *matches* when its value equals the reference value after JSON
  normalisation: object key order is ignored and an integral float equals the
  integer (`1.0 == 1`), but `true` never equals `1` and strings compare exactly.
- Fields reported: the required fields in the given order, then every other key
  seen in the references in first-seen order. `present_rate` is over all
  examples; `exact_match` is over the examples whose reference has the field
  (`support`). Invalid output counts as absent and as a miss.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.eval.metrics.inputs import MetricInputError, check_aligned

_FENCE = re.compile(r"\A```(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)
# Schema error messages kept per example: enough to diagnose, bounded in size.
_MAX_SCHEMA_ERRORS = 5


@dataclass(frozen=True)
class ParsedOutput:
    """The outcome of reading one generated text as a JSON object."""

    value: dict[str, Any] | None
    fenced: bool
    error: str | None

    @property
    def valid(self) -> bool:
        """True when the text held one JSON object."""
        return self.value is not None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json_object(text: str, *, allow_fenced: bool = True) -> ParsedOutput:
    """Read `text` as one JSON object under the module's rules; never raises on bad text."""
    body = text.strip()
    fenced = False
    match = _FENCE.match(body)
    if match:
        fenced = True
        if not allow_fenced:
            return ParsedOutput(None, True, "fenced code block not allowed")
        body = match.group("body").strip()
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except ValueError as error:
        return ParsedOutput(None, fenced, f"invalid JSON: {error}")
    if not isinstance(value, dict):
        return ParsedOutput(None, fenced, f"expected a JSON object, found {type(value).__name__}")
    return ParsedOutput(value, fenced, None)


def normalize_json_value(value: Any) -> str:
    """Canonical JSON text of `value` (sorted keys, integral floats as integers) for equality tests."""
    return json.dumps(_canonical(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _canonical(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        return {str(key): _canonical(item) for key, item in value.items()}
    if isinstance(value, Sequence):
        return [_canonical(item) for item in value]
    return value


@dataclass(frozen=True)
class FieldMetrics:
    """Presence and exact match of one field across the evaluation set."""

    required: bool
    present_rate: float
    exact_match: float
    support: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; guard paths address it, e.g. `fields.name.present_rate`."""
        return {
            "required": self.required,
            "present_rate": self.present_rate,
            "exact_match": self.exact_match,
            "support": self.support,
        }


@dataclass(frozen=True)
class ExtractionExample:
    """What was found in one prediction."""

    index: int
    json_valid: bool
    fenced: bool
    parse_error: str | None
    present_fields: list[str]
    missing_fields: list[str]
    field_matches: dict[str, bool]
    object_match: bool
    schema_valid: bool | None
    schema_errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class ExtractionReport:
    """Format validity, per-field presence and exact match, and schema validity of one evaluation."""

    num_examples: int
    json_valid_rate: float
    fenced_rate: float
    all_required_present_rate: float
    object_exact_match: float
    schema_valid_rate: float | None
    fields: dict[str, FieldMetrics]
    examples: list[ExtractionExample]

    def to_dict(self, *, include_examples: bool = True) -> dict[str, Any]:
        """JSON-ready form; `schema_valid_rate` is omitted when no schema was given."""
        result: dict[str, Any] = {
            "num_examples": self.num_examples,
            "json_valid_rate": self.json_valid_rate,
            "fenced_rate": self.fenced_rate,
            "all_required_present_rate": self.all_required_present_rate,
            "object_exact_match": self.object_exact_match,
            "fields": {name: metrics.to_dict() for name, metrics in self.fields.items()},
        }
        if self.schema_valid_rate is not None:
            result["schema_valid_rate"] = self.schema_valid_rate
        if include_examples:
            result["examples"] = [example.to_dict() for example in self.examples]
        return result


def _schema_validator(schema: Mapping[str, Any]) -> Any:
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    validator_class = validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except SchemaError as error:
        raise ConfigError(
            [Issue(message=f"not a valid JSON Schema: {error.message}", field="json_schema")],
            title="invalid extraction schema",
        ) from error
    return validator_class(schema)


def _reported_fields(required: Sequence[str], references: Sequence[Mapping[str, Any]]) -> list[str]:
    names = list(dict.fromkeys(required))
    seen = set(names)
    for reference in references:
        for key in reference:
            if key not in seen:
                seen.add(key)
                names.append(key)
    return names


def extraction_metrics(
    predictions: Sequence[str],
    references: Sequence[Mapping[str, Any]],
    *,
    required_fields: Sequence[str],
    schema: Mapping[str, Any] | None = None,
    allow_fenced: bool = True,
) -> ExtractionReport:
    """Score raw generated texts against reference objects (rules in the module docstring)."""
    check_aligned(predictions, references, "extraction metrics")
    for index, reference in enumerate(references):
        if not isinstance(reference, Mapping):
            raise MetricInputError(
                f"extraction metrics: reference {index} must be a JSON object, "
                f"found {type(reference).__name__}"
            )
    validator = _schema_validator(schema) if schema is not None else None
    names = _reported_fields(required_fields, references)
    required = set(required_fields)

    examples = [
        _score_example(
            index,
            parse_json_object(text, allow_fenced=allow_fenced),
            reference,
            names,
            required_fields,
            validator,
        )
        for index, (text, reference) in enumerate(zip(predictions, references, strict=True))
    ]
    count = len(examples)
    fields: dict[str, FieldMetrics] = {}
    for name in names:
        scored = [example.field_matches[name] for example in examples if name in example.field_matches]
        fields[name] = FieldMetrics(
            required=name in required,
            present_rate=sum(name in example.present_fields for example in examples) / count,
            exact_match=sum(scored) / len(scored) if scored else 0.0,
            support=len(scored),
        )
    return ExtractionReport(
        num_examples=count,
        json_valid_rate=sum(example.json_valid for example in examples) / count,
        fenced_rate=sum(example.fenced for example in examples) / count,
        all_required_present_rate=sum(
            example.json_valid and not example.missing_fields for example in examples
        )
        / count,
        object_exact_match=sum(example.object_match for example in examples) / count,
        schema_valid_rate=(
            sum(example.schema_valid is True for example in examples) / count
            if validator is not None
            else None
        ),
        fields=fields,
        examples=examples,
    )


def _score_example(
    index: int,
    parsed: ParsedOutput,
    reference: Mapping[str, Any],
    names: Sequence[str],
    required_fields: Sequence[str],
    validator: Any,
) -> ExtractionExample:
    value = parsed.value if parsed.value is not None else {}
    matches = {
        name: name in value and normalize_json_value(value[name]) == normalize_json_value(reference[name])
        for name in names
        if name in reference
    }
    schema_errors: list[str] = []
    schema_valid: bool | None = None
    if validator is not None:
        # Invalid JSON cannot satisfy any schema; it is not validated against an empty object.
        errors = list(validator.iter_errors(parsed.value)) if parsed.valid else []
        errors.sort(key=lambda error: [str(part) for part in error.absolute_path])
        schema_errors = [_describe_schema_error(error) for error in errors[:_MAX_SCHEMA_ERRORS]]
        schema_valid = parsed.valid and not errors
    return ExtractionExample(
        index=index,
        json_valid=parsed.valid,
        fenced=parsed.fenced,
        parse_error=parsed.error,
        present_fields=[name for name in names if name in value],
        missing_fields=[name for name in required_fields if name not in value],
        field_matches=matches,
        object_match=parsed.valid and normalize_json_value(value) == normalize_json_value(reference),
        schema_valid=schema_valid,
        schema_errors=schema_errors,
    )


def _describe_schema_error(error: Any) -> str:
    location = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"{location}: {error.message}"
