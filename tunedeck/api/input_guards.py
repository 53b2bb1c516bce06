"""Refusing the NUL character in URLs: no name, id or value tunedeck stores may hold it.

PostgreSQL text columns and file paths cannot hold NUL; left to them it would surface as
a server error. URLs are refused here with a 400; request bodies by `RequestBody`
(schemas/common.py) with a 422 naming the field.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

from tunedeck.api.errors import error_response


class NulRefusingMiddleware:
    """Answer 400 to any request whose path or query string holds a NUL character (raw or %00)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, unless its URL carries a NUL."""
        if scope["type"] == "http":
            raw_path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogateescape")
            query = scope.get("query_string") or b""
            if b"\x00" in unquote_to_bytes(raw_path) or b"\x00" in unquote_to_bytes(query.replace(b"+", b" ")):
                response = error_response(400, "the URL holds a NUL character (%00), which no name, id or value may")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
