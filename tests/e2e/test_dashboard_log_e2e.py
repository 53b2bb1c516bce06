"""The full log of a finished job: every line, searched with the matches marked, and downloaded as a file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.conftest import SCREENSHOTS, shoot
from tests.e2e.finished_runs import FinishedRuns
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS, open_page
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def finished_job(finished_runs: FinishedRuns) -> str:
    """A tiny job trained to its end (the shared first run)."""
    return finished_runs.first.job_id


def test_the_full_log_searches_and_downloads(
    page: Page, live_server: LiveServer, finished_job: str, tmp_path: Path
) -> None:
    page.goto(f"{live_server.url}/jobs/{finished_job}")
    page.locator("#full-log-link").click()
    expect(page).to_have_url(re.compile(rf"/jobs/{finished_job}/log$"))
    count = page.locator("#log-count")
    expect(count).to_have_text(re.compile(r"^(\d+) of \1 lines$"))
    total = int(count.inner_text().split()[0])
    assert total >= 3
    expect(page.locator("#full-log li")).to_have_count(total)

    page.locator("#log-q").fill("VALIDATION")
    page.locator("#log-q").press("Enter")
    expect(count).to_have_text(f"1 of {total} lines", timeout=UI_TIMEOUT_MS)
    expect(page.locator("#log-q")).to_have_value("VALIDATION")  # the search stays in the box and the URL
    assert "q=VALIDATION" in page.url
    expect(page.locator("#full-log li")).to_have_count(1)
    expect(page.locator("#full-log mark")).to_have_text("validation")
    page.locator("#log-level").select_option("info")
    page.locator("#log-search button[type=submit]").click()
    expect(count).to_have_text(f"0 of {total} lines")
    page.locator("#log-q").fill("")
    page.locator("#log-search button[type=submit]").click()
    expect(page.locator("#full-log li[data-level='info']").first).to_be_visible()
    expect(page.locator("#full-log li:not([data-level='info'])")).to_have_count(0)
    shoot(page, "full-log-desktop")

    with page.expect_download() as waiting:
        page.locator("#log-download").click()
    download = waiting.value
    assert download.suggested_filename == f"job-{finished_job}.log"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    lines = saved.read_text(encoding="utf-8").splitlines()
    assert len(lines) == total
    assert any(line.endswith("warning no validation file: evaluation is skipped") for line in lines)
    assert any(" info model loaded" in line for line in lines)


def test_the_full_log_fits_a_phone(browser: Browser, signed_in: dict[str, object], live_server: LiveServer,
                                   finished_job: str) -> None:  # fmt: skip
    phone = open_page(browser, signed_in, PHONE)  # type: ignore[arg-type]
    try:
        phone.goto(f"{live_server.url}/jobs/{finished_job}/log?q=model")
        expect(phone.locator("#full-log mark").first).to_be_visible()
        assert phone.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
        shoot(phone, "full-log-phone")
    finally:
        phone.context.close()


def test_the_job_page_charts_its_system_readings(
    browser: Browser, signed_in: dict[str, object], live_server: LiveServer, finished_job: str
) -> None:
    for viewport, name in ((DESKTOP, "job-system-desktop"), (PHONE, "job-system-phone")):
        opened = open_page(browser, signed_in, viewport)  # type: ignore[arg-type]
        try:
            opened.goto(f"{live_server.url}/jobs/{finished_job}")
            system = opened.locator("#system")
            expect(system.locator("h2")).to_have_text("System")
            expect(system.locator("[data-system='cpu_percent']")).to_have_attribute("data-loaded", "true")
            expect(system.locator("[data-system='memory_used_mb']")).to_have_attribute("data-loaded", "true")
            expect(system.locator("#system-table tr[data-series='cpu_percent'] td").first).to_have_text("Host CPU")
            assert opened.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
            system.scroll_into_view_if_needed()
            opened.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        finally:
            opened.context.close()
