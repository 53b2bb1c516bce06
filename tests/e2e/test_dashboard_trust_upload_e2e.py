"""The dataset forms check names in the browser, a taken name offers a new version, the token inspector
warns when training would refuse rows, and `/docs` works without network access.

Against the session's `live_server` with Debian chromium (tests/e2e/conftest.py).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.dashboard_inputs import jsonl, register_base_model, upload_dataset
from tests.e2e.signing_in import DESKTOP, PHONE
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import Page, Route, expect

# Bounds on hangs only: the waits end on conditions.
pytestmark = pytest.mark.timeout(600)
EXPECT_MS = 15_000  # a loaded 2-core machine renders slowly
WORK_TIMEOUT_MS = 120_000  # an inspection starts an engine process: slow on a loaded 2-core machine
# Browsers compile a `pattern` attribute with the `v` flag, where an unescaped `-` in a class is an error
# and the browser then skips the check without a word; these are the ones it would skip.
BROKEN_PATTERNS = """() => Array.from(document.querySelectorAll("[pattern]")).map(el => {
  try { new RegExp(el.getAttribute("pattern"), "v"); return [el.id, null]; }
  catch (error) { return [el.id, el.getAttribute("pattern") + ": " + error.message]; }
})"""
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def test_every_pattern_on_the_dataset_pages_is_one_the_browser_checks(page: Page, live_server: LiveServer) -> None:
    rows = jsonl({"text": f"row {i}"} for i in range(3))
    dataset_id = upload_dataset(live_server, "trust-patterns", rows, filename="rows.jsonl")
    checked = 0
    for path in ("/datasets", f"/datasets/{dataset_id}", "/jobs/new", "/models"):
        page.goto(live_server.url + path)
        found = page.evaluate(BROKEN_PATTERNS)
        assert not [broken for _, broken in found if broken], f"{path}: {found}"
        checked += len(found)
    assert checked >= 6  # the upload name and the five hub fields at least


def test_a_bad_dataset_name_shows_the_browsers_message(page: Page, live_server: LiveServer) -> None:
    page.goto(live_server.url + "/datasets")
    expect(page.locator("#upload-form")).to_have_attribute("data-ready", "true", timeout=EXPECT_MS)
    name = page.locator("#upload-name")
    name.fill("bad name!")
    assert name.evaluate("el => el.validity.patternMismatch") is True
    message = str(name.evaluate("el => el.validationMessage"))
    assert message
    page.locator("#upload-file").set_input_files(
        files=[{"name": "rows.jsonl", "mimeType": "application/json", "buffer": b'{"text": "a"}\n'}]
    )
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#err-upload-name")).to_contain_text(message, timeout=EXPECT_MS)
    expect(page.locator("#err-upload-name")).to_contain_text("start with a letter or digit", timeout=EXPECT_MS)
    expect(page).to_have_url(live_server.url + "/datasets", timeout=EXPECT_MS)  # nothing was sent
    name.fill("good-name_1.v2")
    assert name.evaluate("el => el.validity.valid") is True
    # The hub form's fields are checked by their own patterns too.
    page.locator("#hub-id").fill("not an id")
    page.locator("#hub-revision").fill("release/v1-2")
    assert page.locator("#hub-revision").evaluate("el => el.validity.valid") is True
    page.get_by_role("button", name="Register from the hub").click()
    hub_message = str(page.locator("#hub-id").evaluate("el => el.validationMessage"))
    assert hub_message
    expect(page.locator("#err-hub-id")).to_contain_text(hub_message, timeout=EXPECT_MS)
    expect(page.locator("#hub-status")).to_have_text("", timeout=EXPECT_MS)
    shoot(page, "trust-upload-bad-name")


def test_a_taken_name_offers_a_new_version_of_that_dataset(page: Page, live_server: LiveServer) -> None:
    rows = jsonl({"text": f"first {i}"} for i in range(3))
    dataset_id = upload_dataset(live_server, "trust-versions", rows, filename="rows.jsonl")
    page.goto(live_server.url + "/datasets")
    expect(page.locator("#upload-form")).to_have_attribute("data-ready", "true", timeout=EXPECT_MS)
    page.locator("#upload-file").set_input_files(
        files=[{"name": "more.jsonl", "mimeType": "application/json", "buffer": b'{"text": "second"}\n'}]
    )
    page.locator("#upload-name").fill("trust-versions")
    offer = page.locator("#upload-existing")
    expect(offer).to_be_visible(timeout=EXPECT_MS)
    expect(offer).to_contain_text("You already have a dataset named “trust-versions”", timeout=EXPECT_MS)
    expect(page.get_by_label("Upload as version 2 of “trust-versions”")).not_to_be_checked(timeout=EXPECT_MS)
    shoot(page, "trust-upload-name-taken")
    page.set_viewport_size(PHONE)
    shoot(page, "trust-upload-name-taken-phone")
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    page.set_viewport_size(DESKTOP)
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#err-upload-name")).to_contain_text("This name is taken", timeout=EXPECT_MS)
    # No name typed: the file's name is taken, the server refuses it, and the form offers the same choice.
    page.locator("#upload-name").fill("")
    expect(offer).to_be_hidden(timeout=EXPECT_MS)
    page.locator("#upload-file").set_input_files(
        files=[{"name": "trust-versions.jsonl", "mimeType": "application/json", "buffer": b'{"text": "second"}\n'}]
    )
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#upload-status")).to_contain_text("409", timeout=WORK_TIMEOUT_MS)
    expect(page.locator("#upload-name")).to_have_value("trust-versions", timeout=EXPECT_MS)
    expect(offer).to_be_visible(timeout=EXPECT_MS)
    page.get_by_label("Upload as version 2 of “trust-versions”").check()
    page.get_by_role("button", name="Upload as a new version").click()
    expect(page).to_have_url(re.compile(rf"/datasets/{dataset_id}$"), timeout=WORK_TIMEOUT_MS)
    with live_server.api() as api:
        assert api.get(f"/datasets/{dataset_id}").json()["versions"] == 2
    # Another name hides the offer again.
    page.goto(live_server.url + "/datasets")
    page.locator("#upload-name").fill("trust-versions-other")
    expect(offer).to_be_hidden(timeout=EXPECT_MS)


def test_the_token_inspector_warns_in_red_when_training_would_refuse_rows(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer
) -> None:
    register_base_model(live_server, "trust-tiny")
    long_prompt = " ".join(f"word{i}" for i in range(40))
    rows = [{"prompt": f"{long_prompt} question {i}:", "completion": f" answer {i}"} for i in range(4)]
    dataset_id = upload_dataset(live_server, "trust-inspect", jsonl(rows), filename="rows.jsonl")
    for viewport, label in ((DESKTOP, "desktop"), (PHONE, "phone")):
        context = browser.new_context(viewport=viewport, storage_state=signed_in)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{live_server.url}/datasets/{dataset_id}")
        if label == "desktop":
            page.get_by_label("Max length").fill("8")
            page.get_by_label("Truncation", exact=True).select_option("refuse")
            page.get_by_role("button", name="Inspect").click()
            expect(page).to_have_url(re.compile(r"#inspection$"), timeout=WORK_TIMEOUT_MS)
        warning = page.locator("#inspection-refusals")
        expect(warning).to_contain_text("training would refuse 4 of 4 rows", timeout=EXPECT_MS)
        expect(warning).to_contain_text("4 lose their whole answer to truncation at max_length 8", timeout=EXPECT_MS)
        expect(warning).to_contain_text("Rows 1, 2, 3, 4.", timeout=EXPECT_MS)
        assert warning.evaluate("el => getComputedStyle(el).color") == "rgb(185, 28, 28)"
        shoot(page, f"trust-inspect-refused-{label}")
        context.close()
    # Cutting the prompts from the left keeps every answer: nothing would be refused, and no warning shows.
    context = browser.new_context(viewport=DESKTOP, storage_state=signed_in)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/datasets/{dataset_id}")
    page.get_by_label("Max length").fill("8")
    page.get_by_label("Truncation", exact=True).select_option("truncate_prompt")
    page.get_by_role("button", name="Inspect").click()
    expect(page.locator("#inspection")).to_contain_text("truncation truncate_prompt", timeout=WORK_TIMEOUT_MS)
    expect(page.locator("#inspection-refusals")).to_have_count(0, timeout=EXPECT_MS)
    context.close()


def test_api_docs_render_with_no_network(page: Page, live_server: LiveServer) -> None:
    outside: list[str] = []

    def local_only(route: Route) -> None:
        if urlsplit(route.request.url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort("internetdisconnected")

    page.route("**/*", local_only)
    page.goto(live_server.url + "/docs")
    operations = page.locator(".opblock-summary-path")
    expect(operations.first).to_be_visible(timeout=EXPECT_MS)
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/datasets").first).to_be_visible(timeout=EXPECT_MS)
    assert operations.count() > 20
    assert not outside, f"the docs page asked outside hosts for {outside}"
    shoot(page, "trust-docs-offline")
    assert page.request.get(live_server.url + "/redoc").status in (404, 401)
