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
PLAIN_PROMPT_FIELD: Final[str] = "plain_prompt"
"""Chat-row field: the prompt text used when the tokenizer has no chat template (Alpaca rows)."""

# Fields whose presence identifies a format, most specific first: a row with
# `text` and `label` is classification, not text with an extra key; a row with `conversations`,
# `chosen` and `rejected` is a ShareGPT preference row, not a ShareGPT one. `unpaired_preference`
# also needs its `label` to be true or false (`detect_format`): another label is a prompt/completion
# row's extra field.
SIGNATURES: Final[tuple[tuple[str, frozenset[str]], ...]] = (
    ("openai_preference", frozenset({"preferred_output", "non_preferred_output"})),
    ("sharegpt_preference", frozenset({"conversations", "chosen", "rejected"})),
    ("alpaca_preference", frozenset({"instruction", "chosen", "rejected"})),
    ("preference", frozenset({"chosen", "rejected"})),
    ("sharegpt_kto", frozenset({"conversations", "kto_tag"})),
    ("alpaca_kto", frozenset({"instruction", "output", "kto_tag"})),
    ("unpaired_preference", frozenset({"prompt", "completion", "label"})),
    ("chat_kto", frozenset({"messages", "label"})),
    ("chat", frozenset({"messages"})),
    ("sharegpt", frozenset({"conversations"})),
    ("alpaca", frozenset({"instruction", "output"})),
    ("prompt_completion", frozenset({"prompt", "completion"})),
    ("classification", frozenset({"text", "label"})),
    ("extraction", frozenset({"input", "output"})),
    ("text", frozenset({"text"})),
)
SIGNATURE_OF: Final[dict[str, frozenset[str]]] = dict(SIGNATURES)

# Every top-level field each format reads; any other field is reported as ignored.
# Chat and ShareGPT rows may declare their `tools`, ShareGPT rows a `system` prompt.
KNOWN_FIELDS: Final[dict[str, frozenset[str]]] = {
    "text": frozenset({"text"}),
    "prompt_completion": frozenset({"prompt", "completion"}),
    "alpaca": frozenset({"instruction", "input", "output", "system", "history"}),
    "chat": frozenset({"messages", "tools", PLAIN_PROMPT_FIELD}),
    "sharegpt": frozenset({"conversations", "tools", "system"}),
    "classification": frozenset({"text", "label"}),
    "extraction": frozenset({"input", "output"}),
    "preference": frozenset({"prompt", "chosen", "rejected", "tools"}),
    "openai_preference": frozenset({"input", "preferred_output", "non_preferred_output"}),
    "sharegpt_preference": frozenset({"conversations", "chosen", "rejected", "system", "tools"}),
    "alpaca_preference": frozenset({"instruction", "input", "system", "history", "chosen", "rejected"}),
    "unpaired_preference": frozenset({"prompt", "completion", "label", "tools"}),
    "sharegpt_kto": frozenset({"conversations", "kto_tag", "system", "tools"}),
    "alpaca_kto": frozenset({"instruction", "input", "output", "system", "history", "kto_tag"}),
    "chat_kto": frozenset({"messages", "label", "tools"}),
}


# The order a column mapping offers a format's fields in: the prompt side before the answer.
_FIELD_ORDER: Final[tuple[str, ...]] = (
    "text", "prompt", "completion", "system", "instruction", "input", "output", "history", "messages",
    "conversations", "chosen", "rejected", "preferred_output", "non_preferred_output", "label", "kto_tag", "tools",
)  # fmt: skip


def _in_field_order(fields: frozenset[str]) -> list[str]:
    return sorted(
        fields, key=lambda name: (_FIELD_ORDER.index(name) if name in _FIELD_ORDER else len(_FIELD_ORDER), name)
    )


def mappable_fields() -> dict[str, dict[str, list[str]]]:
    """Each format's fields for a column mapping: `required` (they recognise it), `optional` (others it reads)."""
    return {
        name: {
            "required": _in_field_order(SIGNATURE_OF[name]),
            "optional": _in_field_order(KNOWN_FIELDS[name] - SIGNATURE_OF[name] - {PLAIN_PROMPT_FIELD}),
        }
        for name in SOURCE_FORMATS
    }


def format_signatures() -> list[tuple[str, list[str]]]:
    """The formats with the fields that recognise them, most specific first: how `auto` tells a row's format."""
    return [(name, _in_field_order(fields)) for name, fields in SIGNATURES]


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
