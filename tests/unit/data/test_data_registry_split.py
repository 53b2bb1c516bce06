"""Registered versions are immutable and atomic; splits are deterministic and can be sealed."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.fixtures.data import PROMPT_COMPLETION_ROWS, TEXT_ROWS, write_jsonl
from tunedeck.core.errors import DataError, NotFoundError
from tunedeck.data.loading import load_dataset
from tunedeck.data.manifest import DatasetManifest, canonical_line, data_manifest
from tunedeck.data.registry import DatasetRegistry
from tunedeck.data.split import parse_ratios, plan_split, register_split, split_dataset, write_split


def test_register_numbers_versions_and_writes_canonical_rows(
    tmp_path: Path, prompt_completion_file: Path
) -> None:
    registry = DatasetRegistry(tmp_path / "registry")
    first = registry.register(prompt_completion_file, "qa")
    assert first.manifest.version == 1 and first.manifest.rows == len(PROMPT_COMPLETION_ROWS)
    assert first.manifest.id is not None and first.manifest.id.startswith("ds_")
    lines = first.data_path.read_text(encoding="utf-8").splitlines()
    assert lines == [canonical_line(r) for r in PROMPT_COMPLETION_ROWS]
    on_disk = json.loads((first.directory / "manifest.json").read_text(encoding="utf-8"))
    assert DatasetManifest.from_dict(on_disk) == first.manifest
    assert load_dataset(first.data_path).manifest.sha256 == first.manifest.sha256

    bigger = write_jsonl(
        tmp_path / "qa2.jsonl", [*PROMPT_COMPLETION_ROWS, {"prompt": "p", "completion": "c"}]
    )
    second = registry.register(bigger, "qa")
    assert second.manifest.version == 2 and second.manifest.sha256 != first.manifest.sha256
    assert registry.get("qa").manifest.version == 2
    assert registry.get("qa", 1).manifest == first.manifest
    assert registry.get_by_id(second.manifest.id or "").directory == second.directory
    assert registry.names() == ["qa"]
    with pytest.raises(NotFoundError):
        registry.get("qa", 7)


def test_same_content_from_another_file_format_is_the_same_version(tmp_path: Path) -> None:
    registry = DatasetRegistry(tmp_path / "registry")
    first = registry.register(write_jsonl(tmp_path / "a.jsonl", PROMPT_COMPLETION_ROWS), "qa")
    with (tmp_path / "a.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["completion", "prompt"])
        writer.writeheader()
        writer.writerows(PROMPT_COMPLETION_ROWS)
    again = registry.register(tmp_path / "a.csv", "qa")
    assert again.manifest == first.manifest
    assert [v.manifest.version for v in registry.versions("qa")] == [1]


def test_invalid_file_registers_nothing(tmp_path: Path) -> None:
    registry = DatasetRegistry(tmp_path / "registry")
    bad = write_jsonl(tmp_path / "bad.jsonl", [*TEXT_ROWS, {"text": ""}])
    with pytest.raises(DataError):
        registry.register(bad, "notes")
    assert registry.versions("notes") == [] and registry.names() == []
    staging = tmp_path / "registry" / ".staging"
    assert not staging.exists() or list(staging.iterdir()) == []
    kept = registry.register(bad, "notes", drop_invalid=True)
    assert kept.manifest.rows == len(TEXT_ROWS) and kept.manifest.dropped == 1
    assert kept.manifest.notes["dropped_lines"] == [len(TEXT_ROWS) + 1]
    with pytest.raises(DataError):
        registry.register(bad, "../escape")


def test_data_manifest_lists_each_role(tmp_path: Path, text_file: Path, classification_file: Path) -> None:
    registry = DatasetRegistry(tmp_path / "registry")
    version = registry.register(text_file, "notes")
    manifest = data_manifest({"train": version, "validation": load_dataset(classification_file).manifest})
    assert manifest["datasets"]["train"]["sha256"] == version.manifest.sha256
    assert manifest["datasets"]["train"]["version"] == 1
    assert manifest["datasets"]["validation"]["kind"] == "classification"
    assert json.loads(json.dumps(manifest)) == manifest


def test_split_is_deterministic_disjoint_and_complete() -> None:
    plan = plan_split(100, (0.8, 0.1, 0.1), seed=42)
    assert plan == plan_split(100, (0.8, 0.1, 0.1), seed=42)
    assert plan != plan_split(100, (0.8, 0.1, 0.1), seed=43)
    assert [len(plan[s]) for s in ("train", "validation", "test")] == [80, 10, 10]
    assert sorted(plan["train"] + plan["validation"] + plan["test"]) == list(range(100))
    assert plan_split(10, parse_ratios("0.5,0.5"), seed=1)["test"] == []
    for bad in ("0.5,0.6,0.1", "a,b", "1", "0,0.5,0.5"):
        with pytest.raises(DataError):
            parse_ratios(bad)


def test_split_files_manifest_and_seal(tmp_path: Path) -> None:
    rows = [{"text": f"sentence number {i} about topic {i * 7 % 13}"} for i in range(50)]
    loaded = load_dataset(write_jsonl(tmp_path / "all.jsonl", rows), name="corpus")
    parts = split_dataset(loaded, (0.6, 0.2, 0.2), seed=7, seal_test=True)
    manifest = write_split(parts, tmp_path / "out")
    assert set(manifest["splits"]) == {"train", "validation", "test"}
    assert [manifest["splits"][s]["sealed"] for s in ("train", "validation", "test")] == [False, False, True]
    assert manifest["splits"]["test"]["parent"] == loaded.manifest.sha256
    written = {s: load_dataset(tmp_path / "out" / f"{s}.jsonl").rows for s in parts}
    assert sum(len(r) for r in written.values()) == 50
    assert written["test"] == parts["test"].rows
    # Line numbers still point at the source file.
    assert all(
        rows[line - 1] == row
        for line, row in zip(parts["test"].line_numbers, parts["test"].rows, strict=True)
    )
    again = write_split(split_dataset(loaded, (0.6, 0.2, 0.2), seed=7, seal_test=True), tmp_path / "again")
    assert {s: m["sha256"] for s, m in again["splits"].items()} == {
        s: m["sha256"] for s, m in manifest["splits"].items()
    }
    versions = register_split(DatasetRegistry(tmp_path / "registry"), parts, "corpus")
    assert versions["test"].manifest.sealed and versions["test"].manifest.split == "test"
    assert not versions["train"].manifest.sealed and versions["train"].manifest.name == "corpus-train"
