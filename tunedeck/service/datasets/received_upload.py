"""An upload received on this server: the file streamed to disk under a generated name, and its text fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ReceivedUpload:
    """A file streamed to disk, and the small text fields sent beside it."""

    path: Path
    size: int
    suffix: str
    client_name: str = ""  # for messages and a default display name only; never a storage name
    fields: dict[str, str] = field(default_factory=dict)

    def discard(self) -> None:
        """Remove the received file (idempotent)."""
        self.path.unlink(missing_ok=True)
