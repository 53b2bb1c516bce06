"""Server-sent events: the wire format, and a stream that polls the store until a job is terminal.

Polling the database (rather than an in-process pub/sub) keeps the API stateless:
any API process can serve any stream, and the worker may run on another machine.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio


@dataclass(frozen=True)
class StreamItem:
    """One event to send: its sequence number (the SSE id) and its JSON body."""

    seq: int
    event: str
    data: dict[str, Any]


# poll(after_seq) -> (new items in seq order, whether the job is terminal)
Poll = Callable[[int], Awaitable[tuple[list[StreamItem], bool]]]
IsDisconnected = Callable[[], Awaitable[bool]]
StillSignedIn = Callable[[], Awaitable[bool]]
SIGNED_OUT = "signed out: the credential was revoked, or its user disabled"


def format_sse(event: str, data: dict[str, Any], event_id: int | None = None) -> bytes:
    """One SSE message; JSON never contains a raw newline, so `data:` stays on one line."""
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append(f"event: {event}")
    lines.append("data: " + json.dumps(data, separators=(",", ":"), default=str))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


async def poll_stream(
    poll: Poll,
    after: int,
    *,
    is_disconnected: IsDisconnected,
    still_signed_in: StillSignedIn,
    interval: float = 1.0,
    heartbeat: float = 15.0,
    recheck: float = 5.0,
) -> AsyncIterator[bytes]:
    """Yield events after `after` as they appear; end with an `end` event once the job is terminal.

    The terminal check and the fetch happen in one poll, and the stream only ends
    after a poll that found the job terminal *and* returned nothing new, so the
    last events a worker wrote before finishing are never cut off. Every `recheck`
    seconds the credential is checked again: once it no longer signs its user in,
    the stream ends with an `end` event that says so, and sends nothing more.
    """
    last_sent = last_checked = time.monotonic()
    yield b"retry: 3000\n\n"
    while True:
        if time.monotonic() - last_checked >= recheck:
            if not await still_signed_in():
                yield format_sse("end", {"after": after, "reason": SIGNED_OUT})
                return
            last_checked = time.monotonic()
        items, terminal = await poll(after)
        for item in items:
            yield format_sse(item.event, item.data, item.seq)
            after = item.seq
        if items:
            last_sent = time.monotonic()
        elif terminal:
            yield format_sse("end", {"after": after})
            return
        if await is_disconnected():
            return
        if time.monotonic() - last_sent >= heartbeat:
            yield b": keep-alive\n\n"
            last_sent = time.monotonic()
        await anyio.sleep(interval)
