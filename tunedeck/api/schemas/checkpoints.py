"""Checkpoint listings."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


class CheckpointOut(BaseModel):
    """A checkpoint committed to artifact storage (manifest written, row marked)."""

    step: int
    committed: bool
    size_bytes: int | None = None
    files: int | None = None
    manifest_sha256: str | None = None
    metric: float | None = None
    created_at: datetime | None = None
