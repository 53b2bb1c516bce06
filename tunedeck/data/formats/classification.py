"""The `classification` format: a `text` and its class label (in `label` or a named field).

A canonical classification row is `{"text", "label"}` with the label as a class name (a string),
so one class has one spelling whatever the file type (see `class_label`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from tunedeck.core.errors import Issue
from tunedeck.data.formats.field_readers import Row, describe, read_text

DEFAULT_LABEL_COLUMN: Final[str] = "label"


_INTEGRAL_TEXT = re.compile(r"^[+-]?\d+\.0*$")


def class_label(value: Any, tabular: bool = False) -> tuple[str | None, str | None]:
    """A label as its class name, or None and why it cannot be one.

    Labels are class names, so one class has one spelling whatever the file
    type: 1, 1.0 and "1" are class "1"; true/false are "true"/"false". A CSV
    cell is text, so "1.0" and "True" there (pandas writes them) are read the same way.
    """
    if isinstance(value, bool):
        return str(value).lower(), None
    if isinstance(value, int):
        return str(value), None
    if isinstance(value, float):
        if value.is_integer():
            return str(int(value)), None
        return None, "a number that is not whole: a class label is a name or a whole number, not a score"
    if isinstance(value, str) and value.strip():
        label = value.strip()
        if tabular and label.lower() in ("true", "false"):
            return label.lower(), None
        if tabular and _INTEGRAL_TEXT.match(label):
            return str(int(float(label))), None
        return label, None
    return None, None


def normalise_classification(
    record: Mapping[str, Any], tabular: bool, label_column: str = DEFAULT_LABEL_COLUMN
) -> tuple[Row | None, list[Issue]]:
    """A `text` and its class label, read from `label_column`."""
    issues: list[Issue] = []
    text = read_text(record, "text", issues)
    value = record.get(label_column)
    label, why = class_label(value, tabular)
    if label is None:
        issues.append(
            Issue(
                why or ("missing field" if label_column not in record else "wrong type"),
                field=label_column,
                expected="a non-empty string, a whole number or true/false",
                found=describe(value) if label_column in record else "nothing",
            )
        )
    return ({"text": text, "label": label} if not issues else None), issues
