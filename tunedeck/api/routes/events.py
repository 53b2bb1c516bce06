"""Job events: a page after a given id, and a server-sent-events stream that ends with the job."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from tunedeck.api.auth import CurrentUser, Principal, credential_check
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.schemas.common import SQL_INT_MAX, ErrorOut
from tunedeck.api.schemas.metrics import EventOut
from tunedeck.api.sse import StreamItem, poll_stream
from tunedeck.core.errors import NotFoundError
from tunedeck.core.states import JobState
from tunedeck.store.models import JobEvent

router = APIRouter(prefix="/jobs/{job_id}/events", tags=["events"])
STREAM_BATCH = 500


def event_out(event: JobEvent) -> EventOut:
    """The wire form of an event row."""
    return EventOut(
        id=event.id, attempt=event.attempt, seq=event.seq, type=event.type, data=event.payload, time=event.time
    )


@router.get("", response_model=list[EventOut], responses={404: {"model": ErrorOut}})
def list_events(
    job_id: str,
    user: CurrentUser,
    context: Context,
    after: int = Query(0, ge=0, le=SQL_INT_MAX, description="Only events with an id above this one."),
    limit: int = Query(500, ge=1, le=5000),
    type: list[str] | None = Query(None, description="Only these event types (repeatable)."),
) -> list[EventOut]:
    """Events in the order they were recorded."""
    rows = context.jobs.telemetry.list_events(user, job_id, after_id=after, limit=limit, types=type)
    return [event_out(row) for row in rows]


def _poller(context: ApiContext, user: Principal, job_id: str) -> Any:
    def poll_once(after: int) -> tuple[list[StreamItem], bool]:
        # State first, then events: a job seen terminal wrote all its events before finishing.
        try:
            terminal = JobState(context.jobs.jobs.get(user, job_id).state).is_terminal
        except NotFoundError:  # deleted while streaming: nothing more will come
            return [], True
        rows = context.jobs.telemetry.list_events(user, job_id, after_id=after, limit=STREAM_BATCH)
        items = [StreamItem(row.id, row.type, event_out(row).model_dump(mode="json")) for row in rows]
        # A full batch means more may be waiting: never end the stream on it.
        return items, terminal and len(rows) < STREAM_BATCH

    async def poll(after: int) -> tuple[list[StreamItem], bool]:
        return await run_in_threadpool(poll_once, after)

    return poll


@router.get(
    "/stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, 404: {"model": ErrorOut}},
)
async def stream_events(
    job_id: str,
    request: Request,
    user: CurrentUser,
    context: Context,
    after: int = Query(0, ge=0, le=SQL_INT_MAX, description="Start after this event id."),
    last_event_id: str | None = Header(None, alias="Last-Event-ID", include_in_schema=False),
) -> StreamingResponse:
    """Server-sent events (`text/event-stream`): each event as it is recorded; `end` once the job is terminal.

    Reconnecting clients send `Last-Event-ID` and continue where they stopped.
    """
    # Checked before streaming starts, so another user's job is a plain 404.
    await run_in_threadpool(context.jobs.jobs.get, user, job_id)
    if last_event_id is not None and last_event_id.isdigit():
        after = max(after, int(last_event_id))
    stream = poll_stream(
        _poller(context, user, job_id),
        after,
        is_disconnected=request.is_disconnected,
        still_signed_in=credential_check(request, context, user),
        interval=context.stream_poll_seconds,
        recheck=context.stream_recheck_seconds,
    )
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
