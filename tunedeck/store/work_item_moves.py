"""How a work item's row changes when it goes back in line or ends: one rule for every kind."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tunedeck.core.states import WorkState
from tunedeck.store.fencing import token_sha256
from tunedeck.store.models import WorkItem


def held_item(session: Session, item_id: str, token: str) -> WorkItem | None:
    """The running item, locked for update, if `token` is its current fencing token; else None."""
    return session.scalars(
        select(WorkItem)
        .where(
            WorkItem.id == item_id,
            WorkItem.fencing_sha256 == token_sha256(token),
            WorkItem.state == WorkState.RUNNING.value,
        )
        .with_for_update()
    ).one_or_none()


def requeue_item(item: WorkItem, now: datetime) -> None:
    """Back in line, keeping its place (`created_at`); its claim's token stops matching."""
    item.state = WorkState.QUEUED.value
    item.worker_id = None
    item.lease_until = None
    item.fencing_sha256 = None
    item.progress = {}
    item.updated_at = now


def end_item(
    item: WorkItem,
    state: WorkState,
    now: datetime,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> None:
    """End the item with its result or its error; its claim's token stops matching."""
    item.state = state.value
    item.result = result
    item.error = error
    item.lease_until = None
    item.fencing_sha256 = None
    item.finished_at = now
    item.updated_at = now
    if state is not WorkState.SUCCEEDED:
        item.dedup_key = None  # a failed or cancelled item lets the same request be tried again
