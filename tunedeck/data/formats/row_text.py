"""The text of a canonical row of any kind, as one string: what dedup and scanning look at."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tunedeck.data.formats.preference import PREFERENCE_FIELDS, is_preference_row


def _joined(value: Any, system: bool) -> str:
    """A text, or the contents of a list of messages joined by newlines (system ones only if `system`)."""
    if isinstance(value, list):
        return "\n".join(str(m.get("content") or "") for m in value if system or m.get("role") != "system")
    return str(value)


def searchable_text(row: Mapping[str, Any], *, system: bool = True) -> str:
    """All the text of a canonical row joined by newlines: what dedup and scanning look at.

    `system` False leaves out the system messages of preference rows (dedup compares content).
    A preference row reads prompt then answers; an unpaired one ends with its label, so the same
    completion marked both ways is not one row twice.
    """
    if is_preference_row(row):
        parts = [_joined(row[name], system) for name in PREFERENCE_FIELDS if name in row]
        if "label" in row:
            parts.append(f"label: {str(row['label']).lower()}")
        return "\n".join(parts)
    if "messages" in row:
        return "\n".join(str(message.get("content") or "") for message in row["messages"])
    if "prompt" in row:
        return f"{row['prompt']}\n{row['completion']}"
    if "input" in row:
        return f"{row['input']}\n{json.dumps(row['output'], sort_keys=True, ensure_ascii=False)}"
    return str(row.get("text", ""))
