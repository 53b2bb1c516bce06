"""The real server (`tunedeck serve`, embedded worker) on a free loopback port, a tiny model, and Chromium.

Debian's chromium is driven through Playwright's `executable_path`: nothing is
downloaded. Screenshots go to `test-artifacts/screenshots/` (git-ignored).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
TOKEN = re.compile(r"(tdk_[A-Za-z0-9_\-]+)")
START_TIMEOUT_S = 90


@dataclass
class LiveServer:
    """A running `tunedeck serve` and how to reach it."""

    url: str
    token: str
    data_dir: Path
    model_dir: Path
    process: subprocess.Popen[str]

    def api(self) -> httpx.Client:
        """An API client signed in with the admin token."""
        return httpx.Client(
            base_url=self.url + "/api/v1", headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _read_token(process: subprocess.Popen[str], deadline: float) -> str:
    assert process.stdout is not None
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        found = TOKEN.search(line)
        if found:
            return found.group(1)
    raise AssertionError("the server printed no admin token:\n" + "".join(seen))


def _wait_healthy(url: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("the server did not answer its health check in time")


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """`tunedeck serve` with one embedded worker on a fresh data folder, and an unpretrained tiny Llama."""
    from tunedeck.engine.tiny_models import create_tiny_model

    root = tmp_path_factory.mktemp("e2e")
    model_dir = create_tiny_model("llama", root / "model", pretrain_steps=0).path
    port = _free_port()
    # A short lease makes the worker heartbeat (and relay pause/cancel) every second.
    env = {
        **os.environ,
        "TUNEDECK_DATA_DIR": str(root / "data"),
        "TUNEDECK_LEASE_SECONDS": "4",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("TUNEDECK_DATABASE_URL", None)
    env.pop("TUNEDECK_STORAGE_URL", None)
    tunedeck = shutil.which("tunedeck", path=str(Path(sys.executable).parent)) or "tunedeck"
    process = subprocess.Popen(
        [tunedeck, "serve", "--port", str(port), "--workers", "1", "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        token = _read_token(process, deadline)
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, deadline)
        yield LiveServer(url=url, token=token, data_dir=root / "data", model_dir=model_dir, process=process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian chromium through Playwright.

    Module-scoped: Playwright's sync API keeps an event loop running in this thread
    while it is open, which would break later tests that start their own loop.
    """
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is not installed (`make test` installs it)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


def shoot(page: Any, name: str) -> None:
    """Save a full-page screenshot as an artifact."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
