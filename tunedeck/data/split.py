"""Deterministic train/validation/test splits of one dataset, with an optional sealed test split.

The same rows, ratios and seed always give the same split: rows are shuffled by
`random.Random(seed)` (stable across Python versions for integer seeds), cut by
the ratios, and each part keeps the rows' original order. A sealed test split
carries `sealed: true` in its manifest; evaluation enforces the seal.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tunedeck.core.atomic_files import write_json_atomic
from tunedeck.core.errors import DataError, Issue
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


def plan_split(n_rows: int, ratios: Sequence[float] = DEFAULT_RATIOS, seed: int = 42) -> dict[str, list[int]]:
    """Row indices of each split, each list in ascending order; a pure function of its arguments."""
    _, validation_ratio, test_ratio = check_ratios(ratios)
    order = list(range(n_rows))
    random.Random(seed).shuffle(order)
    n_validation = round(n_rows * validation_ratio)
    n_test = min(round(n_rows * test_ratio), n_rows - n_validation)
    cut = n_validation + n_test
    return {
        "validation": sorted(order[:n_validation]),
        "test": sorted(order[n_validation:cut]),
        "train": sorted(order[cut:]),
    }


def split_dataset(
    loaded: LoadedDataset,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    seed: int = 42,
    *,
    seal_test: bool = False,
) -> dict[str, LoadedDataset]:
    """Split a loaded dataset; each part has its own manifest naming the split, its parent and the seed."""
    plan = plan_split(len(loaded.rows), ratios, seed)
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
            notes={"seed": seed, "ratios": list(check_ratios(ratios))},
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
    """Write `<split>.jsonl` files (canonical rows) and then `split_manifest.json`; returns the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for split, part in parts.items():
        write_canonical_jsonl(out_dir / f"{split}.jsonl", part.rows)
    manifest = {"splits": {split: part.manifest.to_dict() for split, part in parts.items()}}
    write_json_atomic(out_dir / "split_manifest.json", manifest)
    return manifest


def register_split(
    registry: DatasetRegistry, parts: dict[str, LoadedDataset], name: str
) -> dict[str, DatasetVersion]:
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
