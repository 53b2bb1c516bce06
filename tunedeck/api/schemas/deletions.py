"""Deletion receipts: what deleting an object removed, and where."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from tunedeck.store.models import DeletionReceipt


class RemovalOut(BaseModel):
    """One removal: `count` things (`bytes` bytes) removed from `what` in `where`."""

    where: str = Field(description="`database`, `storage`, `uploads`, `cache`, or `worker <id>` (its local disk).")
    what: str = Field(description="The table, storage folder, cache entry or local folder.")
    count: int
    bytes: int


class DeletionOut(BaseModel):
    """A deletion's receipt: `pending` until a worker removed every copy, then `done` (or `failed`)."""

    id: str
    target_kind: str = Field(description="dataset, dataset_version, job, export or user.")
    target_id: str
    target_label: str
    reason: str = Field(description="`request` (someone asked) or the policy that deleted it.")
    state: str
    requested_at: datetime
    finished_at: datetime | None
    removed: list[RemovalOut]

    @classmethod
    def of(cls, receipt: DeletionReceipt) -> DeletionOut:
        """The wire form of a receipt row."""
        return cls(
            id=receipt.id,
            target_kind=receipt.target_kind,
            target_id=receipt.target_id,
            target_label=receipt.target_label,
            reason=receipt.reason,
            state=receipt.state,
            requested_at=receipt.requested_at,
            finished_at=receipt.finished_at,
            removed=[RemovalOut(**line) for line in receipt.removed or []],
        )
