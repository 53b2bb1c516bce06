"""A `generate` work item as chat completion answers: the whole completion, its stream's chunks, its errors.

Streaming reads the item's row: while the worker generates, its progress holds the answer
so far (`text`, always a prefix of the final answer); each poll sends what was added since
the last as a content delta. The final text comes from the item's result, so the last
words (written after the last progress report) are never lost.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC
from typing import Any

import anyio
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from tunedeck.api.errors import ErrorAnswer
from tunedeck.api.openai.errors import render_openai_error
from tunedeck.api.openai.schemas.chat import (
    AssistantMessageOut,
    ChatCompletionChunkOut,
    ChatCompletionOut,
    ChoiceOut,
    ChunkChoiceOut,
    DeltaOut,
    FinishReason,
    UsageOut,
)
from tunedeck.api.schemas.common import IssueOut
from tunedeck.core.states import WorkState
from tunedeck.store.models import WorkItem

log = logging.getLogger(__name__)
DONE = b"data: [DONE]\n\n"

# Reads the item's row again (from a thread: the store is synchronous).
Refresh = Callable[[WorkItem], WorkItem]


def completion_id(item: WorkItem) -> str:
    """The completion's id: its work item's."""
    return f"chatcmpl-{item.id}"


def answer_text(item: WorkItem) -> str:
    """The whole answer in a succeeded item's result."""
    return str(((item.result or {}).get("fine_tuned") or {}).get("text") or "")


def finish_reason(item: WorkItem) -> FinishReason:
    """`stop` when the model ended its answer (or reached a stop string), `length` when the token limit did."""
    return "stop" if ((item.result or {}).get("fine_tuned") or {}).get("stopped") else "length"


def usage(item: WorkItem) -> UsageOut:
    """The tokens the worker counted with the model's tokenizer: the prompt's (as the chat template wrote it)
    and the answer's."""
    result = item.result or {}
    prompt = int(result.get("prompt_tokens") or 0)
    completion = int((result.get("fine_tuned") or {}).get("new_tokens") or 0)
    return UsageOut(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def completion(item: WorkItem, model: str) -> ChatCompletionOut:
    """A succeeded item as a whole completion."""
    return ChatCompletionOut(
        id=completion_id(item),
        created=_created(item),
        model=model,
        choices=[ChoiceOut(message=AssistantMessageOut(content=answer_text(item)), finish_reason=finish_reason(item))],
        usage=usage(item),
    )


def failure(item: WorkItem) -> Response:
    """An ended item that did not succeed, as the OpenAI error its failure stands for."""
    error = item.error or {}
    status = int(error.get("status") or 503)
    detail = str(error.get("detail") or f"the generation was {item.state}")
    issues = [IssueOut(**issue) for issue in error.get("issues") or []]
    return render_openai_error(ErrorAnswer(status, detail, issues))


def streamed_text(item: WorkItem) -> str:
    """The answer so far a running item's progress holds."""
    return str((item.progress or {}).get("text") or "")


async def completion_chunks(
    item: WorkItem,
    model: str,
    *,
    refresh: Refresh,
    include_usage: bool,
    poll_s: float,
    deadline: float,
    cancel: Callable[[WorkItem], None],
) -> AsyncIterator[bytes]:
    """The stream's events for `item` (see the module's docstring), ending with `[DONE]`.

    An item that fails, or runs past `deadline` (a `time.monotonic()` value), ends the stream
    with an error event in the client's shape. A stream closed before its item ended (the
    client went away) cancels the item, so that nobody's answer keeps a worker busy.
    """
    meta = {"id": completion_id(item), "created": _created(item), "model": model}

    def chunk(delta: DeltaOut, reason: FinishReason | None = None) -> bytes:
        body = ChatCompletionChunkOut(**meta, choices=[ChunkChoiceOut(delta=delta, finish_reason=reason)])
        return _event(body.model_dump(mode="json"))

    ended = False
    try:
        yield chunk(DeltaOut(role="assistant", content=""))
        sent = ""
        while True:
            text = streamed_text(item)
            if len(text) > len(sent) and text.startswith(sent):
                yield chunk(DeltaOut(content=text[len(sent) :]))
                sent = text
            if WorkState(item.state).is_terminal or time.monotonic() >= deadline:
                break
            await anyio.sleep(poll_s)
            item = await run_in_threadpool(refresh, item)
        ended = WorkState(item.state).is_terminal
        if item.state != WorkState.SUCCEEDED.value:
            yield _error_event(failure(item) if ended else _overran())
            return
        final = answer_text(item)
        if not final.startswith(sent):
            log.warning("completion %s: the streamed text is not a prefix of the answer", meta["id"])
        elif len(final) > len(sent):
            yield chunk(DeltaOut(content=final[len(sent) :]))
        yield chunk(DeltaOut(), finish_reason(item))
        if include_usage:
            body = ChatCompletionChunkOut(**meta, choices=[], usage=usage(item))
            yield _event(body.model_dump(mode="json"))
        yield DONE
    finally:
        if not ended:
            cancel(item)


def _overran() -> Response:
    return render_openai_error(ErrorAnswer(503, "the generation took too long and was cancelled"))


def _error_event(response: Response) -> bytes:
    return b"data: " + bytes(response.body) + b"\n\n"


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode("utf-8") + b"\n\n"


def _created(item: WorkItem) -> int:
    created = item.created_at
    # The database may hand back a naive time: it is UTC.
    return int((created if created.tzinfo is not None else created.replace(tzinfo=UTC)).timestamp())
