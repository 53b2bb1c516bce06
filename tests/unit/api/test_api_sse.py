"""Server-sent events: the wire format and the polling stream's end condition."""

from __future__ import annotations

import asyncio
import json

from tunedeck.api.sse import SIGNED_OUT, StreamItem, format_sse, poll_stream


def test_format_is_one_data_line_with_id_and_event() -> None:
    message = format_sse("log", {"text": "two\nlines"}, 7).decode()
    assert message.endswith("\n\n")
    lines = message.strip("\n").split("\n")
    assert lines[0] == "id: 7" and lines[1] == "event: log"
    assert json.loads(lines[2].removeprefix("data: ")) == {"text": "two\nlines"}


def _collect(polls: list[tuple[list[StreamItem], bool]], start: int = 0) -> tuple[list[bytes], list[int]]:
    asked: list[int] = []

    async def poll(after: int) -> tuple[list[StreamItem], bool]:
        asked.append(after)
        return polls.pop(0)

    async def never() -> bool:
        return False

    async def signed_in() -> bool:
        return True

    async def run() -> list[bytes]:
        return [
            chunk
            async for chunk in poll_stream(poll, start, is_disconnected=never, still_signed_in=signed_in, interval=0)
        ]

    return asyncio.run(run()), asked


def test_stream_ends_only_after_a_terminal_poll_with_nothing_new() -> None:
    item = StreamItem(5, "log", {"n": 1})
    chunks, asked = _collect([([], False), ([item], True), ([], True)], start=2)
    text = b"".join(chunks).decode()
    assert "id: 5\nevent: log" in text
    assert text.rstrip().endswith('event: end\ndata: {"after":5}')
    assert asked == [2, 2, 5]  # each poll continues after the last sent id


def test_stream_stops_when_the_client_disconnects() -> None:
    async def poll(after: int) -> tuple[list[StreamItem], bool]:
        return [], False

    async def gone() -> bool:
        return True

    async def run() -> list[bytes]:
        return [chunk async for chunk in poll_stream(poll, 0, is_disconnected=gone, still_signed_in=gone, interval=0)]

    chunks = asyncio.run(run())
    assert b"event: end" not in b"".join(chunks)


def test_stream_ends_with_the_reason_once_its_credential_no_longer_signs_in() -> None:
    polls = 0
    answers = [True, True, False]  # the third check finds the token revoked

    async def poll(after: int) -> tuple[list[StreamItem], bool]:
        nonlocal polls
        polls += 1
        return [StreamItem(polls, "log", {"n": polls})], False

    async def connected() -> bool:
        return False

    async def signed_in() -> bool:
        return answers.pop(0)

    async def run() -> list[bytes]:
        stream = poll_stream(poll, 0, is_disconnected=connected, still_signed_in=signed_in, interval=0, recheck=0)
        return [chunk async for chunk in stream]

    text = b"".join(asyncio.run(run())).decode()
    assert polls == 2 and "event: log" in text  # nothing is read, or sent, after the failed check
    end = json.dumps({"after": 2, "reason": SIGNED_OUT}, separators=(",", ":"))
    assert text.rstrip().endswith(f"event: end\ndata: {end}")
