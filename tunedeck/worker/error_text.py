"""A failed job's error as its owner reads it: the worker's own folders named by what they are, not by their path.

Errors come from the engine and from libraries that print absolute paths (a checkpoint file, the
attempt's scratch data); the worker's layout is nobody's business but the operator's, and a
path means nothing to the person who started the job.
"""

from __future__ import annotations

from pathlib import Path


def without_worker_paths(text: str | None, named: dict[Path, str]) -> str | None:
    """`text` with each folder of `named` (and everything below it) replaced by its name, longest path first."""
    if not text:
        return text
    for folder in sorted(named, key=lambda path: len(str(path)), reverse=True):
        for spelling in dict.fromkeys((str(folder), str(folder.resolve()))):
            text = text.replace(spelling, named[folder])
    return text
