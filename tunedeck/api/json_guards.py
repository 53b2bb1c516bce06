"""JSON request bodies refused before any route reads them: lone surrogates, nesting too deep, integers too large.

Python's JSON reader accepts all three, and each fails later, deep in a route, as a server
error: a lone surrogate ("\\ud800") cannot be written as UTF-8 to the database or a file, a
schema nested hundreds of levels deep exhausts the validator's recursion, and an integer
beyond 64 bits overflows every database column. They are refused here, on both APIs, with
the field named (422 in tunedeck's error shape, 400 in the OpenAI client's).
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tunedeck.api.errors import error_response
from tunedeck.api.openai.errors import openai_error
from tunedeck.api.schemas.common import IssueOut

MAX_DEPTH = 64  # objects and arrays inside each other; real configs and JSON schemas stay far below
INT_LIMIT = 2**63 - 1  # the largest integer a database column holds
_SURROGATE = re.compile("[\ud800-\udfff]")
_METHODS = {"POST", "PUT", "PATCH"}


def body_problem(value: Any) -> tuple[str, str] | None:
    """(field path, what is wrong) for the first refused value in a parsed JSON body; None when there is none."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict | list) and depth > MAX_DEPTH:
            return path or "body", f"nested more than {MAX_DEPTH} levels deep"
        if isinstance(item, str) and _SURROGATE.search(item):
            return path or "body", "holds a lone UTF-16 surrogate (\\ud800-\\udfff), which is no character"
        if isinstance(item, bool) or not isinstance(item, int | dict | list):
            continue
        if isinstance(item, int):
            if abs(item) > INT_LIMIT:
                return path or "body", f"is larger than {INT_LIMIT} (the largest integer stored)"
            continue
        children = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in reversed(list(children)):
            if isinstance(key, str) and _SURROGATE.search(key):
                return f"{path}.{key!r}" if path else repr(key), "a key holds a lone UTF-16 surrogate"
            here = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))
            stack.append((child, here, depth + 1))
    return None


class JsonBodyGuardMiddleware:
    """Refuse a JSON body with a value no route can store (see the module's docstring); pass the rest on whole."""

    def __init__(self, app: ASGIApp, openai_prefix: str) -> None:
        self.app = app
        self.openai_prefix = openai_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read a JSON body, check it, and give the route the same bytes."""
        if scope["type"] != "http" or scope["method"] not in _METHODS or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        body, more = await _read_body(receive)
        problem = _problem_of(body)
        if problem is not None:
            field, message = problem
            if scope["path"].startswith(self.openai_prefix + "/"):
                response = openai_error(400, f"{field}: {message}", param=field, code="invalid_value")
            else:
                response = error_response(422, "invalid request", [IssueOut(field=field, message=message)])
            await response(scope, receive, send)
            return
        await self.app(scope, _replay(body, more, receive), send)


def _is_json(scope: Scope) -> bool:
    content_type = dict(scope.get("headers") or []).get(b"content-type", b"").decode("latin-1").lower()
    return "json" in content_type


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The whole body, and whether the client is still connected after it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), False
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), True


def _problem_of(body: bytes) -> tuple[str, str] | None:
    try:
        value = json.loads(body)
    except RecursionError:
        return "body", f"nested more than {MAX_DEPTH} levels deep"
    except ValueError:
        return None  # not JSON (or not UTF-8): the route's own parsing answers with its 422
    return body_problem(value)


def _replay(body: bytes, connected: bool, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if not connected:
            return {"type": "http.disconnect"}
        return await receive()

    return replayed
