"""X-Forwarded-For is believed only from the reverse proxies the operator names (`TUNEDECK_TRUSTED_PROXIES`)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.fixtures.live_server import free_port
from tests.waiting import HANG_S
from tunedeck.cli.serve_command import server_config
from tunedeck.core.settings import Settings


async def _client_address(request: Request) -> PlainTextResponse:
    return PlainTextResponse(request.client.host if request.client else "")


def _seen_address(settings: Settings) -> str:
    """The address the app sees for a loopback client that claims to be 203.0.113.9."""
    port = free_port()
    app = Starlette(routes=[Route("/", _client_address)])
    server = uvicorn.Server(server_config(app, settings, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + HANG_S
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return httpx.get(f"http://127.0.0.1:{port}/", headers={"X-Forwarded-For": "203.0.113.9"}).text
    finally:
        server.should_exit = True
        thread.join()


def test_a_client_cannot_choose_its_address_unless_its_proxy_is_trusted(tmp_path: Path) -> None:
    assert _seen_address(Settings(data_dir=tmp_path)) == "127.0.0.1"
    assert _seen_address(Settings(data_dir=tmp_path, trusted_proxies="127.0.0.1")) == "203.0.113.9"
