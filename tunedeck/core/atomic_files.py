"""Files that appear whole or not at all: written beside their place, synced, then renamed over it.

A reader (the worker tailing a run, a second process, a restart after a crash) never
sees half a file: until the rename it sees the old content or nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


@contextmanager
def atomic_text_file(path: Path) -> Iterator[TextIO]:
    """A UTF-8 text stream whose content replaces `path` when the block ends without an error.

    The parent folder is created; the temporary file (0600, as `mkstemp` makes it) is removed on error.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as indented, key-sorted JSON (NaN allowed, text not escaped) to `path`, whole or not at all."""
    with atomic_text_file(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False, sort_keys=True, allow_nan=True)
        handle.write("\n")
