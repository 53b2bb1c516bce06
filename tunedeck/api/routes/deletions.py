"""Deletion receipts (the caller's own, newest first) and the 202 answer every DELETE route gives.

Deleting removes the object's rows at once (it answers 404 from then on) and queues a
worker to remove every other copy; the receipt says what went where and ends `done`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse

from tunedeck.api.auth import CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.deletions import DeletionOut
from tunedeck.store.models import DeletionReceipt

router = APIRouter(prefix="/deletions", tags=["deletions"])
# What a DELETE route may answer besides its 202.
DELETE_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"model": DeletionOut, "description": "Rows removed; the receipt, completed by a worker."},
    403: {"model": ErrorOut},
    404: {"model": ErrorOut},
    409: {"model": ErrorOut},
}


def deletion_accepted(receipt: DeletionReceipt) -> JSONResponse:
    """202 with the receipt, and where to follow it."""
    return JSONResponse(
        status_code=status.HTTP_202_ACCEPTED,
        content=DeletionOut.of(receipt).model_dump(mode="json"),
        headers={"Location": f"/api/v1/deletions/{receipt.id}"},
    )


@router.get("", response_model=list[DeletionOut])
def list_deletions(
    user: CurrentUser, context: Context, limit: int = Query(100, ge=1, le=500)
) -> list[DeletionOut]:
    """The caller's deletion receipts, newest first."""
    return [DeletionOut.of(receipt) for receipt in context.jobs.deletions.list_receipts(user, limit=limit)]


@router.get("/{deletion_id}", response_model=DeletionOut, responses={404: {"model": ErrorOut}})
def get_deletion(deletion_id: str, user: CurrentUser, context: Context) -> DeletionOut:
    """One of the caller's receipts (another user's answers 404)."""
    return DeletionOut.of(context.jobs.deletions.get(user, deletion_id))
