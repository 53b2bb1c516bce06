"""How a request for model work is answered: queued at once (202), or waited for up to `wait` seconds.

A request names its work, the API checks what it can without a model (the objects
exist and are the caller's, the input is valid), queues a work item and answers with
it. With `wait`, the answer comes when the item ends or the time is up: 200 with
the item and its result, the item's own error status (404, 409, 422, 503) with the
usual error body, or 202 with the item still queued or running.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
from fastapi import Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from tunedeck.api.auth import Principal
from tunedeck.api.context import ApiContext
from tunedeck.api.errors import error_response
from tunedeck.api.schemas.common import ErrorOut, IssueOut
from tunedeck.api.schemas.work import WAIT_MAX_S, WorkErrorOut, WorkItemOut
from tunedeck.core.states import WorkState
from tunedeck.store.models import WorkItem

WORK_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": WorkItemOut, "description": "The work ended within `wait`: the item and its result."},
    202: {"model": WorkItemOut, "description": "Queued or running: follow `url` or `events_url`."},
    404: {"model": ErrorOut},
    409: {"model": ErrorOut},
    422: {"model": ErrorOut},
    429: {"model": ErrorOut, "description": "Too much of the caller's work is waiting; retry after `Retry-After`."},
    503: {"model": ErrorOut, "description": "The work failed on the worker (the detail says why)."},
}


def work_item_out(request: Request, item: WorkItem) -> WorkItemOut:
    """The wire form of a work item."""
    error = item.error
    return WorkItemOut(
        id=item.id,
        kind=item.kind,
        state=WorkState(item.state),
        job_id=item.job_id,
        progress=dict(item.progress or {}),
        result=item.result,
        error=None
        if error is None
        else WorkErrorOut(
            status=int(error.get("status", 503)),
            detail=str(error.get("detail", "")),
            issues=[IssueOut(**issue) for issue in error.get("issues") or []],
        ),
        attempt=item.attempt,
        created_at=item.created_at,
        started_at=item.started_at,
        finished_at=item.finished_at,
        url=str(request.app.url_path_for("get_work_item", item_id=item.id)),
        events_url=str(request.app.url_path_for("stream_work_item", item_id=item.id)),
    )


WAIT = Query(0, ge=0, le=WAIT_MAX_S, description="Seconds to wait for the work to end before answering 202.")


async def wait_for_end(context: ApiContext, user: Principal, item: WorkItem, wait: float) -> WorkItem:
    """The item once it ended, or as it is after `wait` seconds (polling the store; no thread is held)."""
    deadline = time.monotonic() + wait
    while not WorkState(item.state).is_terminal and time.monotonic() < deadline:
        await anyio.sleep(min(context.stream_poll_seconds, 0.25, max(0.0, deadline - time.monotonic())))
        item = await run_in_threadpool(context.jobs.work.get, user, item.id)
    return item


async def waited_answer(request: Request, context: ApiContext, user: Principal, item: WorkItem, wait: float) -> Any:
    """The item after waiting up to `wait` seconds for its end, answered as the module docstring says."""
    out = work_item_out(request, await wait_for_end(context, user, item, wait))
    if out.state is WorkState.SUCCEEDED:
        return JSONResponse(status_code=status.HTTP_200_OK, content=out.model_dump(mode="json"))
    if out.state.is_terminal:
        error = out.error or WorkErrorOut(status=503, detail=f"the {out.kind} was {out.state.value}")
        return error_response(error.status, error.detail, error.issues)
    return JSONResponse(status_code=status.HTTP_202_ACCEPTED, content=out.model_dump(mode="json"))
