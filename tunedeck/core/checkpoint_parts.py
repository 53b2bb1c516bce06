"""Which process wrote which part of a checkpoint: one marker file per rank.

On several processes every rank writes its own part of a checkpoint (its random-number
state; its shard of the weights and optimizer state under FSDP), then a marker
`rank-<i>-of-<n>.done`. A checkpoint is complete only when all `n` markers are there: the
worker commits nothing less, and a resume takes nothing less, so a rank that died while
saving can never leave a checkpoint that looks whole. A checkpoint of a one-process run has
no markers and is complete as the trainer wrote it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_MARKER = re.compile(r"^rank-(\d+)-of-(\d+)\.done$")


def part_marker_name(rank: int, world_size: int) -> str:
    """The marker file rank `rank` of `world_size` writes once its part of a checkpoint is on disk."""
    return f"rank-{rank}-of-{world_size}.done"


def mark_part_written(folder: Path, rank: int, world_size: int) -> None:
    """Write this rank's marker in `folder`, durably, after its part of the checkpoint."""
    path = Path(folder) / part_marker_name(rank, world_size)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("done\n")
        handle.flush()
        os.fsync(handle.fileno())


def written_by(folder: Path) -> int:
    """How many processes wrote the checkpoint in `folder` (1 when it has no markers)."""
    sizes = {int(match.group(2)) for entry in _entries(folder) if (match := _MARKER.match(entry))}
    return max(sizes) if sizes else 1


def missing_parts(folder: Path, world_size: int) -> list[int]:
    """The ranks of `world_size` whose marker is missing from `folder` (none for one process)."""
    if world_size <= 1:
        return []
    present = set(_entries(folder))
    return [rank for rank in range(world_size) if part_marker_name(rank, world_size) not in present]


def _entries(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []
