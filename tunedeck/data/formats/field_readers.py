"""Reading one field of a source row, shared by every family of row formats.

A normaliser reads a row field by field; each reader appends an `Issue` naming the field and
what was expected instead of raising, so one pass reports every problem of a row. `describe`
says what was found in those issues.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tunedeck.core.errors import Issue

Row = dict[str, Any]
"""A canonical row, or a canonical message."""
Normaliser = Callable[[Mapping[str, Any], bool], tuple[Row | None, list[Issue]]]
"""Checks a source row (the flag: it came from a CSV file); its canonical row, or None, and every issue."""


def describe(value: object) -> str:
    """A short description of a found value for error messages: its type, and a preview."""
    if value is None:
        return "null"
    if isinstance(value, str):
        preview = value if len(value) <= 40 else value[:37] + "..."
        return f"string {json.dumps(preview, ensure_ascii=False)}" if value.strip() else "an empty string"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)[:8]}"
    return type(value).__name__


def read_text(
    record: Mapping[str, Any],
    key: str,
    issues: list[Issue],
    *,
    field: str | None = None,
    required: bool = True,
) -> str | None:
    """The non-empty string at `key`, or None after appending the matching issue."""
    name = field or key
    if key not in record:
        if required:
            issues.append(Issue("missing field", field=name, expected="a non-empty string", found="nothing"))
        return None
    value = record[key]
    if not isinstance(value, str):
        issues.append(Issue("wrong type", field=name, expected="a string", found=describe(value)))
        return None
    if required and not value.strip():
        issues.append(Issue("empty text", field=name, expected="a non-empty string", found=describe(value)))
        return None
    return value


def decode_cell(value: Any, tabular: bool) -> Any:
    """CSV cells are strings: a structured field there holds JSON text, decoded here."""
    if tabular and isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
