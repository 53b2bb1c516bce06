"""The dashboard's interactive charts and the compare-runs overlay, in a browser.

- The job page draws its metrics with values at the cursor, a log scale, a choice of x-axis
  (step, epoch, time), drag-zoom with a reset, and smoothing, all from named controls.
- From the jobs list, ticking jobs by their row and pressing "Compare selected" overlays their
  curves, one line per job in each legend, beside a table of the config keys that differ.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.finished_runs import JOB_PREFIX, FinishedRuns
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS, open_page
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

# Bounds on hangs only: every wait ends on a condition.
pytestmark = pytest.mark.timeout(900)
OVERFLOW = "() => [document.documentElement.scrollWidth, window.innerWidth]"


def _drag_across(page: Page, chart: Any, start: float, end: float) -> None:
    """Press, move and release the mouse across the chart's plot area, from `start` to `end` of its width."""
    area = chart.locator(".u-over")
    box = area.bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * (start + end) / 2, y, steps=4)
    page.mouse.move(box["x"] + box["width"] * end, y, steps=4)
    page.mouse.up()


def _no_sideways_scroll(page: Page, what: str) -> None:
    scroll, inner = page.evaluate(OVERFLOW)
    assert scroll <= inner + 1, f"{what} scrolls sideways at phone width ({scroll}px > {inner}px)"


def test_job_page_charts_zoom_rescale_and_change_axis(
    page: Page, live_server: LiveServer, finished_runs: FinishedRuns
) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{live_server.url}/jobs/{finished_runs.ids[0]}")
    loss = page.locator("#chart-loss")
    canvas = loss.locator("canvas")
    expect(canvas).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(canvas).to_have_attribute("data-loaded", "true", timeout=UI_TIMEOUT_MS)
    assert int(canvas.get_attribute("data-points") or 0) >= 10
    expect(loss.locator(".chart-legend li[data-series]")).to_have_count(
        2, timeout=UI_TIMEOUT_MS
    )  # training and evaluation loss, one chart

    # Values at the cursor: hovering the plot names the step and fills the legend.
    box = loss.locator(".u-over").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2)
    expect(loss.locator(".legend-x")).to_have_text(re.compile(r"^step \d+$"), timeout=UI_TIMEOUT_MS)
    expect(loss.locator('li[data-series="loss"] .chart-value')).to_have_text(re.compile(r"\d"), timeout=UI_TIMEOUT_MS)

    page.get_by_label("Log scale (y)").check()
    expect(loss).to_have_attribute("data-y-scale", "log", timeout=UI_TIMEOUT_MS)
    expect(loss.locator("canvas")).to_have_attribute(
        "data-loaded", "true", timeout=UI_TIMEOUT_MS
    )  # the new canvas is marked too

    axis = page.get_by_label("X axis")
    expect(axis.locator('option[value="epoch"]')).to_be_enabled(timeout=UI_TIMEOUT_MS)  # the points carry their epoch
    axis.select_option("epoch")
    expect(loss).to_have_attribute("data-x-axis", "epoch", timeout=UI_TIMEOUT_MS)
    expect(axis.locator('option[value="time"]')).to_be_enabled(timeout=UI_TIMEOUT_MS)  # the events carry their time
    axis.select_option("time")
    expect(loss).to_have_attribute("data-x-axis", "time", timeout=UI_TIMEOUT_MS)
    axis.select_option("step")
    expect(loss).to_have_attribute("data-x-axis", "step", timeout=UI_TIMEOUT_MS)

    # Drag-zoom, then the reset button; drag again, then a double-click.
    expect(loss).to_have_attribute("data-zoomed", "false", timeout=UI_TIMEOUT_MS)
    _drag_across(page, loss, 0.2, 0.6)
    expect(loss).to_have_attribute("data-zoomed", "true", timeout=UI_TIMEOUT_MS)
    page.get_by_role("button", name="Reset zoom").click()
    expect(loss).to_have_attribute("data-zoomed", "false", timeout=UI_TIMEOUT_MS)
    _drag_across(page, loss, 0.3, 0.8)
    expect(loss).to_have_attribute("data-zoomed", "true", timeout=UI_TIMEOUT_MS)
    loss.locator(".u-over").dblclick()
    expect(loss).to_have_attribute("data-zoomed", "false", timeout=UI_TIMEOUT_MS)
    # The same from the keyboard, on the focused chart.
    plot = loss.get_by_role("group", name=re.compile("^Loss, a line chart"))
    plot.focus()
    plot.press("+")
    expect(loss).to_have_attribute("data-zoomed", "true", timeout=UI_TIMEOUT_MS)
    plot.press("ArrowLeft")
    expect(loss).to_have_attribute("data-zoomed", "true", timeout=UI_TIMEOUT_MS)
    plot.press("Escape")
    expect(loss).to_have_attribute("data-zoomed", "false", timeout=UI_TIMEOUT_MS)

    # The smoothing slider from the keyboard: Home is no smoothing, the raw points alone.
    smoothing = page.get_by_label("Smoothing")
    smoothing.focus()
    smoothing.press("Home")
    expect(page.locator("#chart-smoothing-value")).to_have_text("0.00", timeout=UI_TIMEOUT_MS)
    smoothing.press("ArrowRight")
    expect(page.locator("#chart-smoothing-value")).to_have_text("0.01", timeout=UI_TIMEOUT_MS)
    # A legend entry hides and shows its series, as a toggle button.
    toggle = loss.get_by_role("button", name=re.compile("^training loss"))
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false", timeout=UI_TIMEOUT_MS)
    toggle.press("Enter")
    expect(toggle).to_have_attribute("aria-pressed", "true", timeout=UI_TIMEOUT_MS)
    page.locator("#metrics").scroll_into_view_if_needed()
    shoot(page, "charts-job-desktop")
    assert not errors, errors  # no control above broke the page's script


def test_job_page_charts_fit_a_phone(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, finished_runs: FinishedRuns
) -> None:
    phone = open_page(browser, signed_in, PHONE)
    try:
        phone.goto(f"{live_server.url}/jobs/{finished_runs.ids[1]}")
        expect(phone.locator("#chart-loss canvas")).to_have_attribute("data-loaded", "true", timeout=UI_TIMEOUT_MS)
        phone.locator("#metrics").scroll_into_view_if_needed()
        shoot(phone, "charts-job-phone")
        _no_sideways_scroll(phone, "the job page")
    finally:
        phone.context.close()


def test_compare_selected_jobs_from_the_list(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, finished_runs: FinishedRuns
) -> None:
    for size_name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page = open_page(browser, signed_in, viewport)
        errors: list[str] = []
        page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))
        try:
            page.goto(f"{live_server.url}/jobs?name={JOB_PREFIX.replace(' ', '+')}")
            compare = page.get_by_role("button", name="Compare selected")
            expect(compare).to_be_disabled(timeout=UI_TIMEOUT_MS)
            page.locator(f'tr[data-job-id="{finished_runs.ids[0]}"]').get_by_role("checkbox").check()
            expect(compare).to_be_disabled(timeout=UI_TIMEOUT_MS)  # one job is not a comparison
            page.locator(f'tr[data-job-id="{finished_runs.ids[1]}"]').get_by_role("checkbox").check()
            expect(compare).to_be_enabled(timeout=UI_TIMEOUT_MS)
            expect(page.locator("#compare-help")).to_have_text("2 jobs ticked.", timeout=UI_TIMEOUT_MS)
            compare.click()
            expect(page).to_have_url(re.compile(r"/jobs/compare\?ids="), timeout=UI_TIMEOUT_MS)
            expect(page.locator("#compare-data")).to_have_attribute("data-ready", "true", timeout=UI_TIMEOUT_MS)

            loss = page.locator("figure.chart", has=page.locator("figcaption", has_text=re.compile("^loss$")))
            expect(loss.locator("canvas")).to_have_attribute("data-loaded", "true", timeout=UI_TIMEOUT_MS)
            legend = loss.locator(".chart-legend li[data-series]")
            expect(legend).to_have_count(2, timeout=UI_TIMEOUT_MS)  # one line per job
            for job_id, name in zip(finished_runs.ids, finished_runs.names, strict=True):
                expect(loss.locator(f'.chart-legend li[data-series="{job_id}"]')).to_contain_text(
                    name, timeout=UI_TIMEOUT_MS
                )
            rate = page.locator('#config-diff tr[data-key="learning_rate"]')
            for run in (finished_runs.first, finished_runs.second):
                expect(rate).to_contain_text(str(run.learning_rate), timeout=UI_TIMEOUT_MS)
            expect(page.locator('#config-diff tr[data-key="epochs"]')).to_have_count(
                0, timeout=UI_TIMEOUT_MS
            )  # the same in both
            expect(page.locator("#final-metrics")).to_contain_text("loss (last logged)", timeout=UI_TIMEOUT_MS)

            page.get_by_label("X axis").select_option("time")
            expect(loss).to_have_attribute("data-x-axis", "time", timeout=UI_TIMEOUT_MS)
            shoot(page, f"charts-compare-{size_name}")
            if size_name == "phone":
                _no_sideways_scroll(page, "the compare page")
            assert not errors, errors
        finally:
            page.context.close()
