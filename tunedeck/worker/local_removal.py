"""Removing a folder on this worker's disk and measuring what went (for a deletion's receipt)."""

from __future__ import annotations

import shutil
from pathlib import Path


def remove_folder(folder: Path) -> tuple[int, int]:
    """Remove `folder` and everything in it; returns (files, bytes) removed, (0, 0) when it was not there.

    A symlink is removed as a link, never followed: nothing outside the folder is touched.
    """
    if folder.is_symlink():
        folder.unlink()
        return 1, 0
    if not folder.is_dir():
        return 0, 0
    files = size = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            files += 1
            size += path.stat().st_size
    shutil.rmtree(folder)
    return files, size
