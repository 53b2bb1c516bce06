"""Removing leftover files and folders, and the report of what a sweep removed (or would remove).

Both the worker's folder sweep (`tunedeck.worker.sweeper`) and the API's sweep of
abandoned uploads use these; the clock is always passed in, so a test decides what is old.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

UPLOAD_LEFTOVER_AGE_S = 3600.0


@dataclass
class SweepReport:
    """What a sweep removed (or, on a dry run, would remove): `{"where", "what", "bytes"}` each, and its errors."""

    dry_run: bool = False
    removed: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        """The bytes freed (or that would be)."""
        return sum(int(item["bytes"]) for item in self.removed)

    def extend(self, other: SweepReport) -> SweepReport:
        """Add another sweep's removals and errors to this report; returns this report."""
        self.removed.extend(other.removed)
        self.errors.extend(other.errors)
        return self

    def summary(self) -> str:
        """One line for the log: how many, how many bytes, and each path."""
        verb = "would remove" if self.dry_run else "removed"
        items = ", ".join(f"{item['where']}:{item['what']}" for item in self.removed)
        line = f"sweep {verb} {len(self.removed)} leftover(s), {self.total_bytes} bytes: {items}"
        return line + (f"; {len(self.errors)} error(s): {'; '.join(self.errors)}" if self.errors else "")


def disk_bytes(path: Path) -> int:
    """The size of a file, or of every file under a folder (links not followed)."""
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(folder) / name).lstat().st_size
            except OSError:
                continue  # removed meanwhile
    return total


def remove_leftover(report: SweepReport, where: str, path: Path) -> None:
    """Remove `path` (a file, a link or a whole folder) and record it; on a dry run, only record it."""
    try:
        size = disk_bytes(path)
        if not report.dry_run:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    except FileNotFoundError:
        return  # gone meanwhile: nothing was removed here
    except OSError as error:
        report.errors.append(f"{path}: {error.strerror or error}")
        return
    report.removed.append({"where": where, "what": str(path), "bytes": size})


def older_than(path: Path, now: datetime, age_s: float) -> bool:
    """Whether `path` was last modified more than `age_s` seconds before `now` (False when it is gone)."""
    try:
        modified = path.lstat().st_mtime
    except FileNotFoundError:
        return False
    return now.timestamp() - modified > age_s


def sweep_upload_leftovers(
    incoming_dir: Path, *, now: datetime, older_than_s: float = UPLOAD_LEFTOVER_AGE_S, dry_run: bool = False
) -> SweepReport:
    """Remove what killed uploads left in `incoming_dir`: every entry not modified for `older_than_s` seconds.

    A file still being received is written to continually, so it is never that old; the
    default of an hour leaves a wide margin for a slow client.
    """
    report = SweepReport(dry_run=dry_run)
    if not incoming_dir.is_dir():
        return report
    for path in sorted(incoming_dir.iterdir()):
        if older_than(path, now, older_than_s):
            remove_leftover(report, "uploads", path)
    return report
