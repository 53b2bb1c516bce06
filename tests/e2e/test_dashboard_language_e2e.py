"""The dashboard in French: a French browser gets French pages and script words; a user's choice overrides it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import expect

pytestmark = pytest.mark.timeout(300)
OVERFLOW = "() => [document.documentElement.scrollWidth, window.innerWidth]"


def test_a_french_browser_reads_french_and_a_choice_of_english_sticks(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer
) -> None:
    for size_name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context = browser.new_context(viewport=viewport, storage_state=signed_in, locale="fr-FR")
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        page.goto(f"{live_server.url}/account")
        expect(page.locator("html")).to_have_attribute("lang", "fr")
        expect(page.get_by_role("navigation", name="Principal").get_by_role("link", name="Tâches")).to_be_visible()
        expect(page.get_by_role("heading", name="Vos jetons")).to_be_visible()
        # A script's words come from the same catalogue: the theme button, written by the script.
        toggle = page.locator("#theme-toggle")
        expect(toggle).to_have_text("Thème : système")
        toggle.click()
        expect(toggle).to_have_text("Thème : clair")
        toggle.click()
        expect(toggle).to_have_text("Thème : sombre")
        toggle.click()  # back to the device's theme, for the pages after this one
        shoot(page, f"language-account-fr-{size_name}")
        scroll, inner = page.evaluate(OVERFLOW)
        assert scroll <= inner + 1, f"the French account page scrolls sideways ({scroll}px > {inner}px)"
        context.close()

    # The user picks English on their account page: the French browser then reads English, everywhere.
    context = browser.new_context(viewport=DESKTOP, storage_state=signed_in, locale="fr-FR")
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    page.goto(f"{live_server.url}/account")
    page.get_by_label("Langue du tableau de bord").select_option("en")
    page.get_by_role("button", name="Enregistrer").click()
    expect(page.get_by_role("status")).to_have_text("The dashboard speaks the language you chose.")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    page.goto(f"{live_server.url}/jobs")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Jobs")).to_be_visible()
    # And back to the browser's language, so the other pages' tests see the default.
    page.goto(f"{live_server.url}/account")
    page.get_by_label("Dashboard language").select_option("")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("html")).to_have_attribute("lang", "fr")
    context.close()
