"""Private files: everything tunedeck writes is readable by the user running it and nobody else.

Datasets, weights, the database and the session key are users' data and secrets. A
process-wide umask makes every file (0600) and folder (0700) that tunedeck or its child
processes create private, whatever umask the shell that started it had; the data folder
and the database file made by an earlier, laxer version are tightened at start.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PRIVATE_UMASK = 0o077
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def restrict_new_files() -> int:
    """From now on, files this process and its children create are 0600 and folders 0700; returns the old umask."""
    return os.umask(PRIVATE_UMASK)


def protect_private_paths(folder: Path, files: Iterable[Path] = ()) -> None:
    """Create `folder` private (0700) or tighten it, and tighten those of `files` that exist to 0600."""
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    folder.chmod(PRIVATE_DIR_MODE)
    for path in files:
        if path.is_file():
            path.chmod(PRIVATE_FILE_MODE)
