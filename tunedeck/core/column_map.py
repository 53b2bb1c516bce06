"""Column mappings: `instruction=question,output=answer` renames a file's fields before its rows are read.

The syntax is parsed here, once, for the CLI (`--map`), the API (`column_map`) and the
dashboard: each pair is `target=source` (the field the format reads = the field the file
has), pairs are separated by commas, and spaces around a name are dropped. A name holds
no `=` or `,`; a target may be named only once.
"""

from __future__ import annotations

from collections.abc import Mapping

# The syntax as a JSON Schema pattern, for the API's form: a name holds something besides spaces
# (a name of spaces alone is empty once stripped). A target named twice is refused by
# `parse_column_map` only: a pattern cannot say it.
_NAME = r"[^=,]*[^=,\s][^=,]*"
COLUMN_MAP_PATTERN = rf"^{_NAME}={_NAME}(,{_NAME}={_NAME})*$"
COLUMN_MAP_MAX_LENGTH = 2000
COLUMN_MAP_SYNTAX = "target=source pairs separated by commas, e.g. instruction=question,output=answer"


class ColumnMapError(ValueError):
    """A column mapping that does not parse; the message says which pair and why."""


def parse_column_map(text: str) -> dict[str, str]:
    """`"instruction=question, output=answer"` -> `{"instruction": "question", "output": "answer"}`.

    Raises ColumnMapError for a pair without `=`, with an empty side or with more than one
    `=`, and for a target named twice (two sources for one field would be ambiguous). The
    same source may feed two targets.
    """
    mapping: dict[str, str] = {}
    for position, pair in enumerate(text.split(","), start=1):
        if "=" not in pair:
            raise ColumnMapError(f"pair {position} {pair.strip()!r} has no '=': expected {COLUMN_MAP_SYNTAX}")
        target, _, source = (part.strip() for part in pair.partition("="))
        if "=" in source:
            raise ColumnMapError(
                f"pair {position} {pair.strip()!r} has more than one '=': expected {COLUMN_MAP_SYNTAX}"
            )
        if not target or not source:
            side = "target (left of '=')" if not target else "source (right of '=')"
            raise ColumnMapError(
                f"pair {position} {pair.strip()!r} has an empty {side}: expected {COLUMN_MAP_SYNTAX}"
            )
        if target in mapping:
            raise ColumnMapError(
                f"target {target!r} is named twice ({target}={mapping[target]} and {target}={source}): "
                "each field the format reads takes one source"
            )
        mapping[target] = source
    return mapping


def format_column_map(mapping: Mapping[str, str]) -> str:
    """The text form of a mapping, `target=source` pairs in their order: what `parse_column_map` reads back."""
    return ",".join(f"{target}={source}" for target, source in mapping.items())
