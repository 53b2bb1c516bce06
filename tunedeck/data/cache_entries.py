"""Finding the tokenized-cache entries built from given dataset contents (to remove them with the data).

An entry's `meta.json` keeps its key parts (`tunedeck.data.cache`), among them the
dataset's content hash, so entries are found by reading those files only: nothing
here loads the cached arrays.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

META_FILE = "meta.json"


def entries_built_from(cache_dir: Path, dataset_sha256s: Iterable[str]) -> list[Path]:
    """The entry folders in `cache_dir` whose dataset hash is one of `dataset_sha256s`, sorted.

    Folders being built (hidden, named `.<key>.*`) and unreadable entries are skipped: an
    unreadable entry is rebuilt on its next use anyway.
    """
    wanted = set(dataset_sha256s)
    if not wanted or not cache_dir.is_dir():
        return []
    found = []
    for entry in sorted(cache_dir.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        try:
            meta = json.loads((entry / META_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        key = meta.get("key") if isinstance(meta, dict) else None
        if isinstance(key, dict) and key.get("dataset") in wanted:
            found.append(entry)
    return found
