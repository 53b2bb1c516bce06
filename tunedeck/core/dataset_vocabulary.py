"""The words an upload form and a dataset use: formats, file types, scan policies and the name rule.

They live here, apart from the data layer that acts on them, so the API and the dashboard can
offer and check them without loading the readers, scanners and deduplication.
"""

from __future__ import annotations

import re
from typing import Final, Literal

SOURCE_FORMATS: Final[tuple[str, ...]] = (
    "text",
    "prompt_completion",
    "chat",
    "alpaca",
    "sharegpt",
    "classification",
    "extraction",
)
FILE_TYPES: Final[tuple[str, ...]] = ("jsonl", "json", "csv", "tsv", "text", "parquet")
Policy = Literal["warn", "block", "redact"]
POLICIES: Final[tuple[str, ...]] = ("warn", "block", "redact")
NAME_PATTERN: Final[re.Pattern[str]] = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
