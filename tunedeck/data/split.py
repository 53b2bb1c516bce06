"""Deterministic train/validation/test splits of one dataset, with an optional sealed test split.

The same rows, ratios and seed always give the same split: rows are shuffled by
`random.Random(seed)` (stable across Python versions for integer seeds), cut by
the ratios, and each part keeps the rows' original order. A sealed test split
carries `sealed: true` in its manifest; evaluation enforces the seal.

Duplicates never straddle two splits: rows that are the same after normalisation,
or near duplicates (the rules of `tunedeck.data.dedup`), are grouped into one
cluster (two rows sharing a duplicate are in the same cluster), and each cluster is
shuffled and placed as one unit. A cluster goes to validation or test only while it
fits their share, else to train, so evaluation splits never exceed their ratio.
The split manifest reports the clusters (`dedup`): how many, how many rows they
hold, and how many a row-by-row cut would have spread over two splits.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import DataError, Issue
from tunedeck.data.dedup import DEFAULT_THRESHOLD, find_duplicates
from tunedeck.data.loading import LoadedDataset
from tunedeck.data.manifest import ContentHasher, write_canonical_jsonl
from tunedeck.data.registry import DatasetRegistry, DatasetVersion

SPLIT_NAMES: tuple[str, str, str] = ("train", "validation", "test")
DEFAULT_RATIOS: tuple[float, float, float] = (0.8, 0.1, 0.1)


def parse_ratios(text: str) -> tuple[float, float, float]:
    """Parse `"0.8,0.1,0.1"` (or two values, test getting none) into checked ratios."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise DataError(
            [Issue("ratios are not numbers", field="ratios", expected="e.g. 0.8,0.1,0.1", found=text)]
        ) from None
    return check_ratios(values)


def check_ratios(ratios: Sequence[float]) -> tuple[float, float, float]:
    """Two or three non-negative ratios summing to 1, as (train, validation, test)."""
    values = list(ratios) + [0.0] * (3 - len(ratios)) if len(ratios) in (2, 3) else None
    if values is None or any(v < 0 for v in values) or abs(sum(values) - 1.0) > 1e-6 or values[0] <= 0:
        raise DataError(
            [
                Issue(
                    "invalid split ratios",
                    field="ratios",
                    expected="2 or 3 non-negative numbers summing to 1, train above 0",
                    found=",".join(str(v) for v in ratios),
                )
            ]
        )
    return values[0], values[1], values[2]


def plan_split(
    n_rows: int,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    seed: int = 42,
    *,
    clusters: Sequence[Sequence[int]] = (),
) -> dict[str, list[int]]:
    """Row indices of each split, each list in ascending order; a pure function of its arguments.

    `clusters` are groups of row indices that must land in one split (duplicates); every
    other row is a group of its own. Without clusters the cut is row by row.
    """
    _, validation_ratio, test_ratio = check_ratios(ratios)
    units = _units(n_rows, clusters)
    random.Random(seed).shuffle(units)
    n_validation = round(n_rows * validation_ratio)
    n_test = min(round(n_rows * test_ratio), n_rows - n_validation)
    plan: dict[str, list[int]] = {"validation": [], "test": [], "train": []}
    for unit in units:
        if len(plan["validation"]) + len(unit) <= n_validation:
            plan["validation"] += unit
        elif len(plan["test"]) + len(unit) <= n_test:
            plan["test"] += unit
        else:
            plan["train"] += unit
    return {split: sorted(indices) for split, indices in plan.items()}


def _units(n_rows: int, clusters: Sequence[Sequence[int]]) -> list[list[int]]:
    """Every row in exactly one unit: the clusters, then each remaining row alone, ordered by first row."""
    unit_of = {index: sorted(cluster) for cluster in clusters for index in cluster}
    units, seen = [], set()
    for index in range(n_rows):
        if index in seen:
            continue
        unit = unit_of.get(index, [index])
        seen.update(unit)
        units.append(unit)
    return units


@dataclass(frozen=True)
class DuplicateClusters:
    """Rows grouped because they are exact or near duplicates of each other (row indices, 2+ rows each)."""

    clusters: list[list[int]]
    exact_pairs: int
    near_pairs: int
    threshold: float

    def report(self, naive: dict[str, list[int]]) -> dict[str, Any]:
        """Counts for the split manifest; `naive` is the row-by-row plan the clusters were kept out of."""
        split_of = {index: split for split, indices in naive.items() for index in indices}
        moved = sum(len({split_of[index] for index in cluster}) > 1 for cluster in self.clusters)
        return {
            "threshold": self.threshold,
            "exact_pairs": self.exact_pairs,
            "near_pairs": self.near_pairs,
            "clusters": len(self.clusters),
            "rows_in_clusters": sum(len(cluster) for cluster in self.clusters),
            "clusters_kept_together": moved,
        }


def duplicate_clusters(loaded: LoadedDataset, threshold: float = DEFAULT_THRESHOLD) -> DuplicateClusters:
    """Group the rows of `loaded` that are exact or near duplicates (`tunedeck.data.dedup` rules)."""
    indexed = replace(loaded, line_numbers=list(range(len(loaded.rows))))  # pairs then name row indices
    report = find_duplicates({"train": indexed}, threshold=threshold)
    parent = list(range(len(loaded.rows)))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for pair in report.pairs:
        first, second = root(pair.first_row), root(pair.second_row)
        if first != second:
            parent[max(first, second)] = min(first, second)
    groups: dict[int, list[int]] = {}
    for index in range(len(parent)):
        groups.setdefault(root(index), []).append(index)
    return DuplicateClusters(
        clusters=[members for members in groups.values() if len(members) > 1],
        exact_pairs=sum(pair.match == "exact" for pair in report.pairs),
        near_pairs=sum(pair.match == "near" for pair in report.pairs),
        threshold=threshold,
    )


def split_dataset(
    loaded: LoadedDataset,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    seed: int = 42,
    *,
    seal_test: bool = False,
    threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, LoadedDataset]:
    """Split a loaded dataset, duplicates kept in one split (module docstring).

    Each part has its own manifest naming the split, its parent, the seed and the
    duplicate clusters report (`notes["dedup"]`, the same in every part).
    """
    found = duplicate_clusters(loaded, threshold)
    plan = plan_split(len(loaded.rows), ratios, seed, clusters=found.clusters)
    dedup = found.report(plan_split(len(loaded.rows), ratios, seed))
    parts: dict[str, LoadedDataset] = {}
    for split in SPLIT_NAMES:
        indices = plan[split]
        if not indices:
            continue
        rows = [loaded.rows[i] for i in indices]
        hasher = ContentHasher()
        for row in rows:
            hasher.add(row)
        manifest = replace(
            loaded.manifest,
            name=f"{loaded.manifest.name}-{split}",
            sha256=hasher.hexdigest(),
            rows=len(rows),
            split=split,
            sealed=seal_test and split == "test",
            parent=loaded.manifest.sha256,
            dropped=0,
            id=None,
            version=None,
            notes={"seed": seed, "ratios": list(check_ratios(ratios)), "dedup": dedup},
        )
        parts[split] = replace(
            loaded,
            rows=rows,
            line_numbers=[loaded.line_numbers[i] for i in indices],
            manifest=manifest,
            dropped=[],
        )
    return parts


def write_split(parts: dict[str, LoadedDataset], out_dir: Path) -> dict[str, Any]:
    """Write `<split>.jsonl` files (canonical rows) and then `split_manifest.json`; returns the manifest.

    The manifest has each split's manifest and, under `dedup`, the duplicate clusters report.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, part in parts.items():
        write_canonical_jsonl(out_dir / f"{split}.jsonl", part.rows)
    dedup = next((part.manifest.notes.get("dedup") for part in parts.values()), None)
    manifest: dict[str, Any] = {"splits": {split: part.manifest.to_dict() for split, part in parts.items()}}
    if dedup is not None:
        manifest["dedup"] = dedup
    write_json_atomic(out_dir / "split_manifest.json", manifest)
    return manifest


def register_split(registry: DatasetRegistry, parts: dict[str, LoadedDataset], name: str) -> dict[str, DatasetVersion]:
    """Register each part as a version of `<name>-<split>`, keeping the split and seal flags."""
    return {
        split: registry.register_rows(
            part.rows,
            f"{name}-{split}",
            kind=part.kind,
            source_format=part.source_format,
            sealed=part.manifest.sealed,
            split=split,
            parent=part.manifest.parent,
            notes=part.manifest.notes,
        )
        for split, part in parts.items()
    }
