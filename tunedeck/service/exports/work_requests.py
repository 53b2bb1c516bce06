"""Queuing a request's model work, within the bound on what one user may have waiting (beyond it: WorkQueueFull)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunedeck.service.context import ServiceContext
from tunedeck.service.exports.work_limits import WorkQueueFull
from tunedeck.store.access import Actor
from tunedeck.store.models import WorkItem
from tunedeck.store.work_items import WORK_KINDS


def refuse_if_busy(context: ServiceContext, user: Actor) -> None:
    """WorkQueueFull when the caller already has as much work waiting as one user may."""
    limit = context.settings.max_pending_work_per_user
    if context.jobs.work.pending_count(user.id, WORK_KINDS) >= limit:
        raise WorkQueueFull(
            f"you already have {limit} uploads, exports, preflights, inspections or generations queued or running "
            f"(TUNEDECK_MAX_PENDING_WORK_PER_USER={limit}); wait for one to end",
        )


def queue_work(
    context: ServiceContext,
    user: Actor,
    kind: str,
    inputs: Mapping[str, Any],
    *,
    identity: Mapping[str, Any] | None = None,
    job_id: str | None = None,
    devices_needed: int = 0,
) -> WorkItem:
    """Queue (or find the identical) work item; WorkQueueFull when the caller has too much waiting.

    The count and the new item are one transaction holding the caller's row, so two requests
    at once cannot both pass the bound.
    """
    with context.jobs.transaction(for_user=user.id):
        refuse_if_busy(context, user)
        item, _created = context.jobs.work.submit(
            user, kind, inputs, identity=identity, job_id=job_id, devices_needed=devices_needed
        )
    return item
