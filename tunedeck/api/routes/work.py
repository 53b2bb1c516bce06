"""Work items: read one (waiting for its end if asked), follow it as server-sent events, cancel it, list them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from tunedeck.api.auth import CurrentUser, credential_check
from tunedeck.api.context import Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.work import WAIT_MAX_S, WorkItemOut
from tunedeck.api.sse import StreamItem, poll_stream
from tunedeck.api.work_answers import wait_for_end, work_item_out
from tunedeck.core.errors import NotFoundError
from tunedeck.core.states import WorkKind, WorkState
from tunedeck.storage.base import upload_prefix

router = APIRouter(prefix="/work", tags=["work"])
_404: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}}


@router.get("", response_model=list[WorkItemOut])
def list_work(
    request: Request,
    user: CurrentUser,
    context: Context,
    job_id: str | None = Query(None, max_length=40, description="Only the items of this job."),
    kind: list[WorkKind] | None = Query(None, description="Only items of these kinds (repeatable)."),
    limit: int = Query(50, ge=1, le=200),
) -> list[WorkItemOut]:
    """The caller's work items, newest first."""
    items = context.jobs.work.list_items(user, job_id=job_id, kinds=kind, limit=limit)
    return [work_item_out(request, item) for item in items]


@router.get("/{item_id}", response_model=WorkItemOut, responses=_404)
async def get_work_item(
    item_id: str,
    request: Request,
    user: CurrentUser,
    context: Context,
    wait: float = Query(0, ge=0, le=WAIT_MAX_S, description="Seconds to wait for the item to end before answering."),
) -> WorkItemOut:
    """One work item: its state, what it is doing, and its result or its error once it ended."""
    item = await run_in_threadpool(context.jobs.work.get, user, item_id)
    return work_item_out(request, await wait_for_end(context, user, item, wait))


@router.post("/{item_id}/cancel", response_model=WorkItemOut, responses=_404)
def cancel_work_item(item_id: str, request: Request, user: CurrentUser, context: Context) -> WorkItemOut:
    """Cancel a queued or running item (a running one's result is dropped when its worker ends).

    A cancelled ingestion's upload is removed from storage at once: no attempt will read it again.
    """
    item = context.jobs.queue.cancel(user, item_id)
    if item.kind == "ingest" and item.state == WorkState.CANCELLED.value and item.inputs.get("upload_id"):
        context.artifacts.delete_prefix(upload_prefix(item.owner_id, str(item.inputs["upload_id"])))
    return work_item_out(request, item)


@router.get(
    "/{item_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **_404},
)
async def stream_work_item(item_id: str, request: Request, user: CurrentUser, context: Context) -> StreamingResponse:
    """Server-sent events: a `work` event with the item each time it changes, then `end` once it ended."""
    await run_in_threadpool(context.jobs.work.get, user, item_id)

    def poll_once(after: int) -> tuple[list[StreamItem], bool]:
        try:
            item = context.jobs.work.get(user, item_id)
        except NotFoundError:  # deleted with its job while streaming
            return [], True
        stamp = int(item.updated_at.timestamp() * 1_000_000)
        if stamp <= after:
            return [], WorkState(item.state).is_terminal
        return [StreamItem(stamp, "work", work_item_out(request, item).model_dump(mode="json"))], False

    async def poll(after: int) -> tuple[list[StreamItem], bool]:
        return await run_in_threadpool(poll_once, after)

    stream = poll_stream(
        poll,
        0,
        is_disconnected=request.is_disconnected,
        still_signed_in=credential_check(request, context, user),
        interval=context.stream_poll_seconds,
        recheck=context.stream_recheck_seconds,
    )
    return StreamingResponse(
        stream, media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
