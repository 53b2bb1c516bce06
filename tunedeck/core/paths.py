"""Containment on resolved paths: a folder inside the operator's roots, and no link leading out of it.

A user names a model folder on the server; what may be read is decided on the real
path (links resolved), never on the text the user sent.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path


def inside_any(path: Path, roots: Iterable[Path]) -> bool:
    """True when `path`, links resolved, is one of `roots` or below one of them."""
    real = path.resolve()
    return any(real.is_relative_to(root.resolve()) for root in roots)


def links_leaving(folder: Path) -> list[str]:
    """Every entry below `folder` (relative path) that is a link resolving outside it; links are not followed."""
    root = folder.resolve()
    leaving = []
    for directory, subfolders, files in os.walk(folder, followlinks=False):
        for name in (*subfolders, *files):
            path = Path(directory) / name
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                leaving.append(path.relative_to(folder).as_posix())
    return sorted(leaving)


def roots_text(roots: Sequence[Path]) -> str:
    """The roots as a user reads them in a message."""
    return ", ".join(str(root) for root in roots) or "none configured"
