"""The chunks of a streamed chat completion, from a work item's successive rows (no worker, no database)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import anyio

from tunedeck.api.openai.chat_answers import completion_chunks


def _item(state: str, text: str = "", **fields: Any) -> Any:
    """A work item's row as the stream reads it: its state, its progress text, its result or error."""
    row = {"result": None, "error": None, **fields}
    created = datetime(2026, 1, 1, tzinfo=UTC)
    return SimpleNamespace(id="wi_1", created_at=created, state=state, progress={"text": text}, **row)


def _events(
    rows: list[Any], *, include_usage: bool = False, stop_after: int | None = None
) -> tuple[list[str], list[str]]:
    """The stream's events over `rows` (the first as the route hands it over, the rest as polls read them), and
    the items it cancelled."""
    later: Iterator[Any] = iter(rows[1:])
    cancelled: list[str] = []

    async def collect() -> list[str]:
        chunks = completion_chunks(
            rows[0], "m", refresh=lambda item: next(later), include_usage=include_usage, poll_s=0.0,
            deadline=float("inf"), cancel=lambda item: cancelled.append(item.id),
        )  # fmt: skip
        events = []
        async for event in chunks:
            events.append(event.decode().removeprefix("data: ").strip())
            if stop_after is not None and len(events) == stop_after:
                await chunks.aclose()  # the client went away
                break
        return events

    return anyio.run(collect), cancelled


def test_new_text_is_sent_as_deltas_and_the_rest_comes_from_the_result() -> None:
    answer = {"text": "Hello world", "new_tokens": 3, "stopped": True}
    done = _item("succeeded", "Hello wor", result={"prompt_tokens": 5, "fine_tuned": answer})
    events, cancelled = _events([_item("running", "Hel"), _item("running", "Hello"), done], include_usage=True)
    assert events[-1] == "[DONE]" and not cancelled
    chunks = [json.loads(event) for event in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [chunk["choices"][0]["delta"]["content"] for chunk in chunks[1:-2]]
    assert deltas == ["Hel", "lo", " wor", "ld"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


def test_a_failure_after_the_stream_started_is_an_error_event_in_the_client_shape() -> None:
    failed = _item("failed", "Hel", error={"status": 503, "detail": "the generate failed on the worker: boom"})
    events, cancelled = _events([_item("running", "Hel"), failed])
    error = json.loads(events[-1])["error"]
    assert error["type"] == "server_error" and "boom" in error["message"]
    assert "[DONE]" not in events and not cancelled  # it ended on its own: nothing to cancel


def test_a_client_that_goes_away_cancels_the_item() -> None:
    events, cancelled = _events([_item("running", "Hel"), _item("running", "Hello")], stop_after=2)
    assert len(events) == 2 and cancelled == ["wi_1"]
