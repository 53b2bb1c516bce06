"""The dashboard's layout in the browser: the job form keeps its derived values in sight, and the dark theme."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import SCREENSHOTS, shoot
from tests.e2e.signing_in import PHONE, UI_TIMEOUT_MS, open_page
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.timeout(300)
IN_VIEW = """el => { const box = el.getBoundingClientRect();
  return box.height > 0 && box.top >= 0 && box.bottom <= window.innerHeight + 1; }"""
BACKGROUND = "() => getComputedStyle(document.documentElement).backgroundColor"


def _luminance(css_rgb: str) -> float:
    """Relative brightness (0 black, 1 white) of an `rgb(r, g, b)` colour."""
    red, green, blue = (int(part) for part in css_rgb[css_rgb.index("(") + 1 : css_rgb.index(")")].split(",")[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def test_the_derived_values_stay_in_sight_while_editing_the_last_fields(page: Page, live_server: LiveServer) -> None:
    page.goto(f"{live_server.url}/jobs/new")
    page.locator("#advanced > summary").click()
    last_field = page.locator("#advanced [data-field] input:visible").last
    last_field.scroll_into_view_if_needed()
    derived = page.locator("#derived")
    assert derived.evaluate("el => el.getBoundingClientRect().top >= 0"), "the derived values scrolled off the top"
    assert page.locator("#lr-schedule").evaluate(IN_VIEW), "the learning-rate plot is off-screen while editing"
    page.get_by_label("Batch size").fill("8")
    expect(page.locator("#derived-effective_batch_size")).to_have_text("32", timeout=UI_TIMEOUT_MS)
    expect(page.locator("#derived-summary")).to_be_hidden()  # the full values are beside the form already
    shoot(page, "layout-job-form-advanced-desktop")


def test_the_learning_rate_plot_follows_the_window_width_and_the_theme(page: Page, live_server: LiveServer) -> None:
    page.goto(f"{live_server.url}/jobs/new")
    plot = page.locator("#lr-schedule")
    expect(plot.locator("canvas")).to_have_count(1, timeout=UI_TIMEOUT_MS)
    points = plot.get_attribute("data-points")
    assert points not in (None, "0")
    fits = "el => Math.abs(el.querySelector('.uplot').getBoundingClientRect().width - el.clientWidth) <= 1"
    assert plot.evaluate(fits), "the plot does not fill its box"
    wide = plot.evaluate("el => el.clientWidth")
    page.set_viewport_size({"width": 700, "height": 800})
    page.wait_for_function(f"() => ({fits})(document.getElementById('lr-schedule'))", timeout=UI_TIMEOUT_MS)
    assert plot.evaluate("el => el.clientWidth") != wide, "the box kept its width: nothing was resized"
    # A new theme draws the plot anew (its axes in the theme's colours), with the same points.
    plot.evaluate("el => { el.querySelector('.uplot').dataset.before = 'theme'; }")
    page.get_by_role("button", name="Theme: system").click()
    expect(plot.locator(".uplot[data-before]")).to_have_count(0, timeout=UI_TIMEOUT_MS)
    expect(plot.locator("canvas")).to_have_count(1)
    expect(plot).to_have_attribute("data-points", points or "")


def test_on_a_phone_a_summary_of_the_derived_values_follows_the_edits(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer
) -> None:
    phone = open_page(browser, signed_in, PHONE)
    phone.goto(f"{live_server.url}/jobs/new")
    summary = phone.locator("#derived-summary")
    expect(summary).to_contain_text("Batch 16", timeout=UI_TIMEOUT_MS)
    batch = phone.get_by_label("Batch size")
    batch.scroll_into_view_if_needed()
    batch.fill("2")
    expect(summary).to_contain_text("Batch 8", timeout=UI_TIMEOUT_MS)
    assert summary.evaluate(IN_VIEW), "the summary is not in sight while editing"
    assert not batch.evaluate(
        "el => { const a = el.getBoundingClientRect(), b = document.getElementById('derived-summary')"
        ".getBoundingClientRect(); return a.bottom > b.top && a.top < b.bottom; }"
    ), "the summary covers the field being edited"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # what the phone shows now, not the whole page
    phone.screenshot(path=str(SCREENSHOTS / "layout-job-form-summary-phone.png"))
    phone.context.close()


def test_the_dark_theme_is_chosen_in_the_top_bar_and_kept(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer
) -> None:
    page = open_page(browser, signed_in)
    page.goto(f"{live_server.url}/jobs")
    toggle = page.get_by_role("button", name="Theme: system")
    light = _luminance(page.evaluate(BACKGROUND))
    assert light > 0.9, page.evaluate(BACKGROUND)
    toggle.click()
    expect(page.get_by_role("button", name="Theme: light")).to_be_visible()
    page.get_by_role("button", name="Theme: light").click()
    expect(page.get_by_role("button", name="Theme: dark")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert _luminance(page.evaluate(BACKGROUND)) < 0.15, page.evaluate(BACKGROUND)
    # Kept in this browser: the next page opens dark, with readable text on its cards.
    page.goto(f"{live_server.url}/jobs/new")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    text = page.locator("h1").evaluate("el => getComputedStyle(el).color")
    assert _luminance(text) > 0.7, text
    field = page.get_by_label("Job name").evaluate("el => getComputedStyle(el).backgroundColor")
    assert _luminance(field) < 0.2, field
    shoot(page, "layout-dark-job-form-desktop")
    page.context.close()

    # "system" follows the device: a device set to dark gets the dark theme without a choice.
    dark_device = browser.new_context(viewport=PHONE, storage_state=signed_in, color_scheme="dark").new_page()
    dark_device.goto(f"{live_server.url}/datasets")
    expect(dark_device.get_by_role("button", name="Theme: system")).to_be_visible(timeout=UI_TIMEOUT_MS)
    expect(dark_device.locator("html")).to_have_attribute("data-theme", "dark")
    shoot(dark_device, "layout-dark-datasets-phone")
    dark_device.context.close()

