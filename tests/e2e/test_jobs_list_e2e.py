"""The jobs list in a browser: filtered by tag in the URL, sorted from its headers; tags edited on the job page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.e2e.conftest import SCREENSHOTS, shoot
from tests.e2e.dashboard_inputs import chat_rows, create_job, register_inputs, wait_terminal
from tests.e2e.signing_in import PHONE, open_page
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import Browser, Page, expect

pytestmark = pytest.mark.timeout(600)
MODEL_NAME = "jobs-list-llama"  # names of this file's own on the session server the dashboard tests share
DATASET_NAME = "jobs-list-train"
TAG = "e2e-list"


@pytest.fixture(scope="module")
def tagged_jobs(live_server: LiveServer) -> Iterator[dict[str, str]]:
    """Two jobs tagged with this file's tag, cancelled at once (nothing trains to its end)."""
    inputs = register_inputs(live_server, MODEL_NAME, DATASET_NAME, chat_rows(1, lambda i: ("Hi", "Hello")))
    ids = {}
    # Each run is held at its first step until its cancel stops it: a tiny run could otherwise end first.
    live_server.hold_training_from(1)
    try:
        for name, tags in (("list bravo", [TAG]), ("list alpha", [TAG, "alpha"])):
            ids[name] = create_job(live_server, inputs, name, {"epochs": 1, "preflight": False}, tags=tags)
            with live_server.api() as api:
                assert api.post(f"/jobs/{ids[name]}/cancel").status_code == 200
            # The worker may have claimed the job before the cancel came: it is cancelled once its run stops.
            assert wait_terminal(live_server, ids[name])["state"] == "cancelled"
    finally:
        live_server.release_training()
    yield ids


@contextmanager
def _on_phone(browser: Browser, signed_in: dict[str, object]) -> Iterator[Page]:
    """A signed-in page at phone width, closed after its use whatever happened in it."""
    phone = open_page(browser, signed_in, PHONE)  # type: ignore[arg-type]
    try:
        yield phone
    finally:
        phone.context.close()


def _names(page: Page) -> list[str]:
    # Each row's first link is the job's name, whatever cells come before it.
    names: list[str] = page.locator("#jobs-table tbody tr").evaluate_all(
        "rows => rows.map(row => row.querySelector('a').textContent)"
    )
    return names


def test_filter_by_tag_then_sort_by_name_both_ways(
    page: Page, live_server: LiveServer, tagged_jobs: dict[str, str]
) -> None:
    page.goto(f"{live_server.url}/jobs")
    page.locator("#filter-tag").select_option(TAG)
    page.locator("#job-filters button[type=submit]").click()
    expect(page).to_have_url(re.compile(rf"tag={TAG}"))
    expect(page.locator("#jobs-table tbody tr")).to_have_count(2)
    assert _names(page) == ["list alpha", "list bravo"]  # newest first
    expect(page.locator("th[data-sort=created]")).to_have_attribute("aria-sort", "descending")

    page.locator("th[data-sort=name] a").click()
    expect(page.locator("th[data-sort=name]")).to_have_attribute("aria-sort", "ascending")
    expect(page).to_have_url(re.compile(rf"tag={TAG}.*sort=name&order=asc"))
    assert _names(page) == ["list alpha", "list bravo"]
    page.locator("th[data-sort=name] a").click()
    expect(page.locator("th[data-sort=name]")).to_have_attribute("aria-sort", "descending")
    assert _names(page) == ["list bravo", "list alpha"]
    expect(page.locator("#filter-tag")).to_have_value(TAG)  # the filter stays chosen
    expect(page.locator(f"tr[data-job-id='{tagged_jobs['list alpha']}'] .tag")).to_have_text([TAG, "alpha"][::-1])
    shoot(page, "jobs-list-desktop")


def test_the_list_fits_a_phone(
    browser: Browser, signed_in: dict[str, object], live_server: LiveServer, tagged_jobs: dict[str, str]
) -> None:
    with _on_phone(browser, signed_in) as phone:
        phone.goto(f"{live_server.url}/jobs?tag={TAG}&sort=name&order=asc")
        expect(phone.locator("#jobs-table tbody tr")).to_have_count(2)
        assert phone.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
        shoot(phone, "jobs-list-phone")


def test_tags_are_edited_on_the_job_page(page: Page, live_server: LiveServer, tagged_jobs: dict[str, str]) -> None:
    job_id = tagged_jobs["list bravo"]
    page.goto(f"{live_server.url}/jobs/{job_id}")
    expect(page.locator("#job-tags")).to_have_value(TAG)
    page.locator("#job-tags").fill(f"{TAG}, reviewed")
    page.locator("#save-tags").click()
    expect(page.locator("#tags-notice")).to_have_text("Tags saved.")
    expect(page.locator("#job-tags")).to_have_value(f"{TAG}, reviewed")
    page.locator("#job-tags").fill("not/allowed")
    page.locator("#save-tags").click()
    expect(page.locator("#tags-notice")).to_contain_text("Tags not saved")
    expect(page.locator("#job-tags")).to_have_value(f"{TAG}, reviewed")
    page.goto(f"{live_server.url}/jobs?tag=reviewed")
    assert _names(page) == ["list bravo"]


def test_the_tag_form_fits_a_phone(
    browser: Browser, signed_in: dict[str, object], live_server: LiveServer, tagged_jobs: dict[str, str]
) -> None:
    with _on_phone(browser, signed_in) as phone:
        phone.goto(f"{live_server.url}/jobs/{tagged_jobs['list alpha']}")
        expect(phone.locator("#job-tags")).to_be_visible()
        expect(phone.locator("#save-tags")).to_be_visible()
        assert phone.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
        phone.locator("#tags").scroll_into_view_if_needed()
        phone.screenshot(path=str(SCREENSHOTS / "job-tags-phone.png"))
