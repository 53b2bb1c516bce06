"""Refuse an export whose text artifacts (model card, configs, results) contain a secret or personal data.

The scan is the dataset scanner's (`tunedeck.data.scan.scan_text`): secrets, and personal data
(emails, phone numbers, IBANs, card numbers, IP addresses), because a model card or a config
leaves the machine with the model, and a person's email in a dataset name or a log line
should not. What tunedeck itself writes must not trip it, so three kinds of value are exempt:

* content hashes the export records (dataset sha256, weight fingerprints, commit hashes), which
  look exactly like high-entropy secrets: those known values, and nothing else; likewise the
  ids of tunedeck's own jobs the export records (the pin chain names the jobs it came from);
* digit runs that are part of a decimal number (`2.3456789012345678`, `1.5e-05`): a float's
  17 significant digits pass the Luhn check one time in ten, and metrics are full of them;
* dotted version strings recorded under a version key (`"transformers": "4.57.1.2"` style
  four-part versions parse as IPv4 addresses).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tunedeck.core.errors import DataError, Issue
from tunedeck.data.scan import PERSONAL_TYPES, scan_text

HASH_KEYS = frozenset(
    {"sha256", "fingerprint", "revision", "commit", "tokenizer_sha256", "manifest_sha256", "procedure_sha256", "parent",
     # the pin chain of a model started from another job's: each ancestor's weights, a parent's full weights
     "weights_sha256", "parent_weights_fingerprint"}
)  # fmt: skip
ID_KEYS = frozenset({"job_id"})
_HEX = re.compile(r"^[0-9a-fA-F]{7,128}$")
_OWN_ID = re.compile(r"^[a-z]{2,8}_[A-Za-z0-9_-]{8,64}$")  # `tunedeck.core.ids.new_id`: a prefix, then random
_DOTTED = re.compile(r"^\d+(?:\.\d+){1,5}$")
_NUMERIC_TYPES = frozenset({"card_number", "phone"})
_FRACTION_BEFORE = re.compile(r"\d\.$")  # "2." right before the digits: they are a fraction
_DECIMAL_AFTER = re.compile(r"\.\d|[eE][-+]?\d")  # ".5" or "e-05" right after: they are a mantissa


def recorded_hashes(documents: Iterable[Any]) -> set[str]:
    """Hex values stored under hash-like keys, and tunedeck ids under id keys, anywhere in `documents`."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(item, str) and _recorded(str(key), item):
                    found.add(item)
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    for document in documents:
        walk(document)
    return found


def _recorded(key: str, value: str) -> bool:
    """Whether `value`, stored under `key`, is a hash or an id tunedeck wrote itself."""
    if key in HASH_KEYS or key.endswith("_sha256"):  # every `*_sha256` tunedeck records is a content hash
        return _HEX.match(value) is not None
    return key in ID_KEYS and _OWN_ID.match(value) is not None


def recorded_versions(documents: Iterable[Any]) -> set[str]:
    """Dotted version strings (`1.2.3.4`) anywhere in `documents`: package and driver versions, not addresses.

    env.json records versions as `{"versions": {"torch": "2.5.1"}}` and as `*_version` keys; any
    dotted all-digit string there is a version by construction.
    """
    found: set[str] = set()

    def walk(value: Any, versions: bool) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                inside = versions or "version" in str(key).lower()
                if inside and isinstance(item, str) and _DOTTED.match(item):
                    found.add(item)
                walk(item, inside)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, versions)

    for document in documents:
        walk(document, False)
    return found


def _part_of_decimal_number(text: str, start: int, end: int) -> bool:
    """True when text[start:end] is the integer or fraction part of a decimal or exponent number.

    A sentence's full stop after a number is not a decimal point: a digit must follow it.
    """
    return _FRACTION_BEFORE.search(text, 0, start) is not None or _DECIMAL_AFTER.match(text, end) is not None


def refuse_secrets(texts: Mapping[str, str], allowed: set[str]) -> None:
    """Raise DataError listing every secret and piece of personal data found in `texts` (name → text).

    Findings are masked, with file and line. `allowed` holds values the export recorded itself
    (content hashes); version strings found in the JSON texts are added to it.
    """
    allowed = allowed | recorded_versions(json_documents(texts))
    issues = []
    for name, text in texts.items():
        for finding in scan_text(text, personal=True):
            value = text[finding.start : finding.end]
            if value in allowed or value.strip("`'\"") in allowed:
                continue
            if finding.type in _NUMERIC_TYPES and _part_of_decimal_number(text, finding.start, finding.end):
                continue
            what = "personal data" if finding.type in PERSONAL_TYPES else "secret"
            issues.append(
                Issue(
                    f"possible {what} ({finding.type}): {finding.excerpt}",
                    file=name,
                    line=text.count("\n", 0, finding.start) + 1,
                    expected=f"no {'personal data' if what == 'personal data' else 'credentials'} in exported "
                             "files (remove it from the config or data and export again)",
                    found=finding.masked,
                )
            )
    if issues:
        raise DataError(issues, title="the export was refused: its text files contain what looks like a secret "
                                      "or personal data")


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
