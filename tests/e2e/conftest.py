"""Chromium for the dashboard tests; the server they drive is `live_server` (tests/fixtures/live_server.py).

`finished_runs` is the pair of finished jobs most files only look at (tests/e2e/finished_runs.py).

Debian's chromium is driven through Playwright's `executable_path`: nothing is
downloaded. Screenshots go to `test-artifacts/screenshots/` (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.finished_runs import FinishedRuns, train_finished_runs
from tests.e2e.signing_in import open_page, sign_in_state
from tests.fixtures.live_server import LiveServer

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


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


@pytest.fixture(scope="module")
def signed_in(browser: Any, live_server: LiveServer) -> dict[str, Any]:
    """The admin's signed-in browser storage state, made once per test file."""
    return sign_in_state(browser, live_server.url, live_server.token)


@pytest.fixture
def page(browser: Any, signed_in: dict[str, Any]) -> Iterator[Any]:
    """A signed-in desktop page."""
    opened = open_page(browser, signed_in)
    yield opened
    opened.context.close()


@pytest.fixture(scope="session")
def finished_runs(live_server: LiveServer) -> FinishedRuns:
    """Two LoRA jobs trained to success once per test process, the first time a test asks; look, do not change."""
    return train_finished_runs(live_server)
