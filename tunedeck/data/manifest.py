"""Dataset manifests: what a dataset version is, and the content hash that identifies it.

The hash is taken over canonical rows, one canonical JSON line each (sorted keys,
no spaces, UTF-8), so the same rows give the same hash whatever the key order,
whitespace or file format they came from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from tunedeck.core.atomic_files import atomic_text_file

MANIFEST_SCHEMA_VERSION = 1


# One encoder for every row: `json.dumps` with options builds a new JSONEncoder per call, which
# costs about as much as encoding a short row. Same options, so the same text and hashes.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_line(row: Mapping[str, Any]) -> str:
    """The canonical JSON text of one row, without the newline."""
    return _CANONICAL_ENCODER.encode(row)


class ContentHasher:
    """Streaming sha256 over canonical rows; feed rows in order, read `hexdigest()`."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.rows = 0

    def add(self, row: Mapping[str, Any]) -> str:
        """Hash one row and return its canonical line (so writers need not encode it twice)."""
        line = _CANONICAL_ENCODER.encode(row)
        self._sha.update((line + "\n").encode("utf-8"))
        self.rows += 1
        return line

    def hexdigest(self) -> str:
        """The sha256 of every row added so far."""
        return self._sha.hexdigest()


def content_sha256(rows: Iterable[Mapping[str, Any]]) -> str:
    """sha256 of canonical rows: equal for equal content, whatever its source file looked like."""
    hasher = ContentHasher()
    for row in rows:
        hasher.add(row)
    return hasher.hexdigest()


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string, the form every manifest uses."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class DatasetManifest:
    """What identifies a dataset: its content hash, shape and size, and for registered ones its version.

    `id` and `version` are set once a registry has stored it; `sealed` marks a
    test split that evaluation may read only once; `parent` names the version a
    derived one (a split, a redaction, a dedup) was made from.
    """

    name: str
    sha256: str
    format: str
    kind: str
    rows: int
    created_at: str = field(default_factory=utc_now)
    id: str | None = None
    version: int | None = None
    sealed: bool = False
    split: str | None = None
    parent: str | None = None
    dropped: int = 0
    notes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; the schema version lets later readers tell old manifests apart."""
        return {"schema_version": MANIFEST_SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetManifest:
        """Read a manifest written by `to_dict`, ignoring keys this version does not know."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class HasManifest(Protocol):
    """Anything that carries a manifest, such as a loaded dataset or a registered version."""

    @property
    def manifest(self) -> DatasetManifest:
        """The manifest of this dataset."""
        ...


def data_manifest(datasets: Mapping[str, DatasetManifest | HasManifest]) -> dict[str, Any]:
    """The `data_manifest.json` of a run: each dataset used, by role (train, validation, test, ...)."""
    out: dict[str, Any] = {}
    for role, item in datasets.items():
        manifest = item if isinstance(item, DatasetManifest) else item.manifest
        out[role] = manifest.to_dict()
    return {"schema_version": MANIFEST_SCHEMA_VERSION, "datasets": out}


def write_canonical_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> str:
    """Write canonical rows to `path`, whole or not at all; returns their sha256."""
    hasher = ContentHasher()
    with atomic_text_file(path) as handle:
        for row in rows:
            handle.write(hasher.add(row) + "\n")
    return hasher.hexdigest()
