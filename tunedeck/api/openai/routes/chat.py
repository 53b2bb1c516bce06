"""`/v1/chat/completions`: answer a conversation with a fine-tuned model, a checkpoint of one, or a base model.

The route checks the request (`chat_request`), finds the model (`model_lookup`), and queues
a `generate` work item under the caller's usual limits; a worker's generation process
answers it. The route waits for a worker to take the item up (`chat_worker_wait_s`): when
none does, the item is cancelled and the answer is a 503. Then it waits for the answer, or
streams it as it is generated (`chat_answers`).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tunedeck.api.auth import CurrentUser, Principal
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.openai.chat_answers import completion, completion_chunks, failure, streamed_text
from tunedeck.api.openai.chat_request import generation_inputs
from tunedeck.api.openai.errors import openai_error
from tunedeck.api.openai.model_lookup import find_model
from tunedeck.api.openai.schemas.chat import ChatCompletionIn, ChatCompletionOut
from tunedeck.api.work_answers import wait_for_end
from tunedeck.core.errors import NotFoundError
from tunedeck.core.states import WorkState
from tunedeck.service.exports.work_requests import queue_work
from tunedeck.store.models import WorkItem

router = APIRouter()

# The longest an answer may take once a worker generates it: past it, the item is cancelled (503).
ANSWER_MAX_S = 900.0
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": description}
    for status, description in (
        (400, "A field tunedeck does not honour, or content that is not text (`param` names the field)."),
        (404, "No such model for the caller (`code`: `model_not_found`)."),
        (429, "Too much of the caller's work is waiting."),
        (503, "No worker took the request up in time, or the generation failed."),
    )
}


@router.post(
    "/chat/completions",
    response_model=ChatCompletionOut,
    responses={200: {"content": {"text/event-stream": {}}}, **_ERRORS},
)
async def create_chat_completion(body: ChatCompletionIn, user: CurrentUser, context: Context) -> Any:
    """A chat completion; with `stream`, server-sent chunks as the answer is generated, then `[DONE]`."""
    inputs = generation_inputs(body)
    try:
        found = await run_in_threadpool(find_model, context.jobs, context.artifacts, user, body.model)
    except NotFoundError as error:
        return openai_error(404, str(error), param="model", code="model_not_found")
    if found.job is not None:
        target: dict[str, Any] = {"job_id": found.job.id, "step": found.step}
    else:
        target = {"base_model_id": found.base.id}
    job_id = found.job.id if found.job is not None else None
    item = await run_in_threadpool(queue_work, context, user, "generate", {**target, **inputs}, job_id=job_id)
    item = await _taken_up(context, user, item)
    if item.state == WorkState.QUEUED.value:
        await run_in_threadpool(_cancel, context, user, item)
        wait = context.settings.chat_worker_wait_s
        return openai_error(503, f"no worker answered within {wait:g} s (TUNEDECK_CHAT_WORKER_WAIT_S); "
                                 "the request was cancelled, try again later")  # fmt: skip
    deadline = time.monotonic() + ANSWER_MAX_S
    if body.stream:
        return await _stream(context, user, item, body, deadline)
    item = await wait_for_end(context, user, item, max(0.0, deadline - time.monotonic()))
    return _whole_answer(context, user, item, body.model)


async def _stream(
    context: ApiContext, user: Principal, item: WorkItem, body: ChatCompletionIn, deadline: float
) -> Response:
    """The stream, once the first words or the end are in: a request refused by the worker is then still an
    HTTP error, as the client expects, rather than an error event in a stream already under way."""
    poll_s = _poll_s(context)
    while not WorkState(item.state).is_terminal and not streamed_text(item) and time.monotonic() < deadline:
        await anyio.sleep(poll_s)
        item = await run_in_threadpool(context.jobs.work.get, user, item.id)
    if WorkState(item.state).is_terminal and item.state != WorkState.SUCCEEDED.value:
        return failure(item)
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    chunks = completion_chunks(
        item, body.model, refresh=lambda current: context.jobs.work.get(user, current.id), include_usage=include_usage,
        poll_s=poll_s, deadline=deadline, cancel=lambda current: _cancel(context, user, current),
    )  # fmt: skip
    return StreamingResponse(chunks, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _whole_answer(context: ApiContext, user: Principal, item: WorkItem, model: str) -> Response:
    if item.state == WorkState.SUCCEEDED.value:
        return JSONResponse(completion(item, model).model_dump(mode="json"))
    if WorkState(item.state).is_terminal:
        return failure(item)
    _cancel(context, user, item)
    return openai_error(503, f"the generation took longer than {ANSWER_MAX_S:g} s and was cancelled")


async def _taken_up(context: ApiContext, user: Principal, item: WorkItem) -> WorkItem:
    """The item once a worker took it up (or it ended), or still queued after `chat_worker_wait_s`."""
    deadline = time.monotonic() + context.settings.chat_worker_wait_s
    while item.state == WorkState.QUEUED.value and time.monotonic() < deadline:
        await anyio.sleep(min(_poll_s(context), max(0.0, deadline - time.monotonic())))
        item = await run_in_threadpool(context.jobs.work.get, user, item.id)
    return item


def _cancel(context: ApiContext, user: Principal, item: WorkItem) -> None:
    """Cancel an answer nobody waits for any more, so that it does not run (or go on running) for nobody."""
    context.jobs.queue.cancel(user, item.id)


def _poll_s(context: ApiContext) -> float:
    # Streamed words come at the pace of the worker's reports (a few a second): poll at least as often.
    return min(context.stream_poll_seconds, 0.1)
