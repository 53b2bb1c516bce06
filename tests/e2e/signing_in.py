"""Signing a browser in to the dashboard, and the two viewports every page is tried at."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
UI_TIMEOUT_MS = 15_000  # a loaded 2-core machine answers slowly; the waits still end on conditions


def sign_in_state(browser: Any, url: str, token: str) -> dict[str, Any]:
    """The storage state of a browser signed in with `token` (the sign-in form submitted with Enter)."""
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(url + "/login")
    page.get_by_label("API token").fill(token)
    page.get_by_label("API token").press("Enter")
    expect(page).to_have_url(re.compile(r"/jobs$"), timeout=UI_TIMEOUT_MS)
    state: dict[str, Any] = context.storage_state()
    context.close()
    return state


def open_page(browser: Any, state: dict[str, Any], viewport: dict[str, int] = DESKTOP) -> Page:
    """A new page in its own context, signed in as `state` says."""
    opened: Page = browser.new_context(viewport=viewport, storage_state=state).new_page()
    opened.set_default_timeout(UI_TIMEOUT_MS)
    return opened
