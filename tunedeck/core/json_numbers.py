"""JSON has one number type: `3.0` and `3` are the same integer, as JSON Schema reads them.

Python decodes them as a float and an int. Before input is validated strictly (no `0` for
`false`, no `"5"` for `5`), whole floats become ints, so an integer field takes `3.0` as the
OpenAPI document promises, and a float field takes either.
"""

from __future__ import annotations

import math
from typing import Any


def whole_numbers_as_ints(value: Any) -> Any:
    """`value` with every finite whole float, at any depth of lists and objects, turned into an int."""
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else value
    if isinstance(value, dict):
        return {key: whole_numbers_as_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers_as_ints(item) for item in value]
    return value
