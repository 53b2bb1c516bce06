"""Checkpoint listings and stored-file listings."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class StoredFileOut(BaseModel):
    """One file of a committed folder, as its manifest records it."""

    path: str
    size: int
    sha256: str


class CheckpointOut(BaseModel):
    """A checkpoint: `written` on a worker's disk, or `committed` to storage with its manifest."""

    step: int
    state: str
    committed: bool
    is_best: bool
    metrics: dict[str, Any] = Field(default_factory=dict)
    manifest_sha256: str | None = None
    created_at: datetime
    committed_at: datetime | None = None


class CheckpointDetailOut(CheckpointOut):
    """A checkpoint with the files of its manifest (committed checkpoints only)."""

    files: list[StoredFileOut] = Field(default_factory=list)
    total_bytes: int = 0
