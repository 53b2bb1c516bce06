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
    "preference",
    "openai_preference",
    "sharegpt_preference",
    "alpaca_preference",
    "unpaired_preference",
    "sharegpt_kto",
    "alpaca_kto",
    "chat_kto",
)
def known_source_format(value: str) -> str:
    """`value` when it is `auto` or a row format the ingestion reads; ValueError (with the choices) otherwise."""
    if value != "auto" and value not in SOURCE_FORMATS:
        raise ValueError(f"expected auto or one of {', '.join(SOURCE_FORMATS)}")
    return value


FILE_TYPES: Final[tuple[str, ...]] = ("jsonl", "json", "csv", "tsv", "text", "parquet")
FILE_EXTENSIONS: Final[dict[str, str]] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".txt": "text",
    ".parquet": "parquet",
    ".pq": "parquet",
}
"""The file type each extension names."""
COMPRESSED_SUFFIX: Final[str] = ".gz"
"""After a text file's extension (`.jsonl.gz`), a gzip file: read as it decompresses. Parquet compresses itself."""


def dataset_suffix(filename: str) -> str:
    """The lower-cased extension of `filename` that names a readable file type (`.csv`, `.jsonl.gz`), or ''."""
    parts = [part.lower() for part in filename.rsplit("/", 1)[-1].split(".")[1:]]
    if not parts:
        return ""
    last = f".{parts[-1]}"
    if last == COMPRESSED_SUFFIX and len(parts) >= 2:
        inner = f".{parts[-2]}"
        readable = inner in FILE_EXTENSIONS and FILE_EXTENSIONS[inner] != "parquet"
        return inner + COMPRESSED_SUFFIX if readable else ""
    return last if last in FILE_EXTENSIONS else ""
Policy = Literal["warn", "block", "redact"]
POLICIES: Final[tuple[str, ...]] = ("warn", "block", "redact")
# These patterns are also a browser form's `pattern` attribute (`html_pattern`), which browsers compile
# with the `v` flag: there a `-` or `/` inside a class must be escaped, or the browser skips the check.
NAME_PATTERN: Final[re.Pattern[str]] = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,99}$")

# A hub dataset request: `owner/name`, a split or subset name, a branch, tag or commit. Checked
# here once so the API refuses a bad request before queueing it and the worker checks the same.
HUB_ID_PATTERN: Final[re.Pattern[str]] = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}$"
)
HUB_PART_PATTERN: Final[re.Pattern[str]] = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
HUB_REVISION_PATTERN: Final[re.Pattern[str]] = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\/\-]{0,199}$")


def html_pattern(pattern: re.Pattern[str]) -> str:
    """`pattern` as an HTML `pattern` attribute: without its anchors, which the browser adds around it."""
    return pattern.pattern.removeprefix("^").removesuffix("$")
