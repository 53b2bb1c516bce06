"""Where a dataset version lives in artifact storage, and committing one there.

Layout of a version (under `tunedeck.storage.base.dataset_prefix`), committed with a
MANIFEST.json so a worker's download is checksum-verified:

    data.jsonl             canonical rows (the version's `storage_key` points here)
    preview.json           the first rows, so previews never read the whole file
    dataset_manifest.json  the data layer's manifest (sha256, format, kind, rows)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tunedeck.storage.base import ArtifactStore
from tunedeck.store.models import DatasetVersion

DATA_FILE = "data.jsonl"
PREVIEW_FILE = "preview.json"
MANIFEST_FILE = "dataset_manifest.json"
PREVIEW_ROWS = 100  # rows kept in a version's preview


def version_prefix(version: DatasetVersion) -> str:
    """The storage folder of a version (the parent of its data file)."""
    return storage_key_prefix(version.storage_key)


def storage_key_prefix(storage_key: str) -> str:
    """The storage folder of the version whose data file is `storage_key`."""
    return storage_key.rsplit("/", 1)[0]


def commit_version_files(
    artifacts: ArtifactStore,
    prefix: str,
    canonical: Path,
    preview: list[dict[str, Any]],
    manifest: dict[str, Any],
    staging: Path,
) -> str:
    """Commit a version's files under `prefix` (moving `canonical` into `staging`); returns its storage key.

    Already committed (a retried ingestion) means already there: nothing is written twice.
    """
    if artifacts.read_manifest(prefix) is None:
        staging.mkdir(parents=True, exist_ok=True)
        shutil.move(str(canonical), staging / DATA_FILE)
        (staging / PREVIEW_FILE).write_text(json.dumps(preview, ensure_ascii=False), encoding="utf-8")
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        artifacts.commit_directory(staging, prefix)
    return f"{prefix}/{DATA_FILE}"
