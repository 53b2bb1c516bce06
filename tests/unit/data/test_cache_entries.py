"""Cache entries are found by the dataset hash in their meta.json; entries being built or unreadable are left alone."""

from __future__ import annotations

import json
from pathlib import Path

from tunedeck.data.cache_entries import entries_built_from


def _entry(root: Path, name: str, meta: object) -> Path:
    entry = root / name
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return entry


def test_only_complete_entries_of_the_named_contents_are_found(tmp_path: Path) -> None:
    wanted = _entry(tmp_path, "k1", {"key": {"dataset": "a" * 64}})
    _entry(tmp_path, "k2", {"key": {"dataset": "b" * 64}})
    _entry(tmp_path, ".k3.tmp", {"key": {"dataset": "a" * 64}})  # still being built
    (tmp_path / "k4").mkdir()
    (tmp_path / "k4" / "meta.json").write_text("{not json", encoding="utf-8")
    _entry(tmp_path, "k5", ["not", "a", "dict"])
    assert entries_built_from(tmp_path, ["a" * 64]) == [wanted]
    assert entries_built_from(tmp_path, []) == []
    assert entries_built_from(tmp_path / "missing", ["a" * 64]) == []
