"""The `text` format: rows of one `text` field, kept as they are (continued pretraining)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunedeck.core.errors import Issue
from tunedeck.data.formats.field_readers import Row, read_text


def normalise_text(record: Mapping[str, Any], tabular: bool) -> tuple[Row | None, list[Issue]]:
    """A `text` row: its non-empty `text` field, unchanged."""
    issues: list[Issue] = []
    text = read_text(record, "text", issues)
    return ({"text": text} if not issues else None), issues
