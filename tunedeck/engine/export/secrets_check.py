"""Refuse an export whose text artifacts (model card, configs, results) contain a secret.

The scan is the dataset scanner's (`tunedeck.data.scan.scan_text`), secrets only. Content
hashes that the export itself records (dataset sha256, weight fingerprints, commit hashes)
look exactly like high-entropy secrets, so those known values are exempt, and nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.scan import scan_text

HASH_KEYS = frozenset(
    {"sha256", "fingerprint", "revision", "commit", "tokenizer_sha256", "manifest_sha256", "procedure_sha256", "parent"}
)
_HEX = re.compile(r"^[0-9a-fA-F]{7,128}$")


def recorded_hashes(documents: Iterable[Any]) -> set[str]:
    """Hex values stored under hash-like keys anywhere in `documents` (JSON-like data)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if str(key) in HASH_KEYS and isinstance(item, str) and _HEX.match(item):
                    found.add(item)
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    for document in documents:
        walk(document)
    return found


def refuse_secrets(texts: Mapping[str, str], allowed: set[str]) -> None:
    """Raise DataError listing every secret found (masked, with file and line) in `texts` (name → text)."""
    issues = []
    for name, text in texts.items():
        for finding in scan_text(text, personal=False):
            value = text[finding.start : finding.end]
            if value in allowed or value.strip("`'\"") in allowed:
                continue
            issues.append(
                Issue(
                    f"possible secret ({finding.type}): {finding.excerpt}",
                    file=name,
                    line=text.count("\n", 0, finding.start) + 1,
                    expected="no credentials in exported files (remove it from the config or data and export again)",
                    found=finding.masked,
                )
            )
    if issues:
        raise DataError(issues, title="the export was refused: its text files contain what looks like a secret")


def read_texts(folder: Path, names: Iterable[str]) -> dict[str, str]:
    """The named text files of `folder` that exist, by name."""
    return {
        name: (folder / name).read_text(encoding="utf-8", errors="replace")
        for name in names
        if (folder / name).is_file()
    }


def json_documents(texts: Mapping[str, str]) -> list[Any]:
    """The texts that parse as JSON, parsed (to collect their recorded hashes)."""
    parsed = []
    for name, text in texts.items():
        if name.endswith(".json"):
            try:
                parsed.append(json.loads(text))
            except json.JSONDecodeError:
                continue  # not JSON after all: its hashes (if any) are not exempt
    return parsed
