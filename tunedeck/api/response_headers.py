"""Headers every answer carries: `X-Content-Type-Options: nosniff`, so no browser runs a download as a page.

Downloads (checkpoint files, exports, logs, archives) hold what users uploaded or trained; a
browser that guessed a file's type could render one as HTML in tunedeck's origin.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class NoSniffMiddleware:
    """Add `X-Content-Type-Options: nosniff` to every HTTP answer that does not set it already."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; mark the answer's headers as it starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
            await send(message)

        await self.app(scope, receive, marked)
