"""Dataset previews and uploads with the file's own column names, and base model facts, in a browser.

A CSV whose columns are not the format's field names is mapped in the upload form (the browser
reads its header) and previews as a table; a chat dataset previews as bubbles whose raw JSON
opens; the models page and the job form's picker show a model's facts, read from its files.
Against the session's `live_server` with Debian chromium (tests/e2e/conftest.py); every name here
is this file's own.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.dashboard_inputs import jsonl, register_base_model, upload_dataset
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS, open_page
from tests.fixtures.live_server import LiveServer
from tests.fixtures.model_folders import PARAMETERS_PER_SHARD, write_model_folder

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.timeout(600)
WORK_TIMEOUT_MS = 120_000  # an upload is ingested by the server's worker: slow on a loaded machine
LONG_ANSWER = "Rain forms when water vapour cools and condenses around dust into droplets. " * 4
NO_SIDEWAYS_SCROLL = "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
# The elements that reach past the viewport's right edge, outside a scrolling table: what to fix when it scrolls.
WIDER_THAN_PAGE = """() => Array.from(document.querySelectorAll("body *"))
  .filter(el => el.getBoundingClientRect().right > document.documentElement.clientWidth + 1
    && !(el.parentElement && el.parentElement.closest(".table-wrap")))
  .slice(0, 8).map(el => el.tagName + "#" + el.id + "." + el.className)"""


def _chat_dataset(live_server: LiveServer, name: str) -> str:
    rows = [
        {
            "messages": [
                {"role": "system", "content": "You answer in one sentence."},
                {"role": "user", "content": f"How many legs has a spider, number {i}?"},
                {"role": "assistant", "content": "A spider has eight legs."},
            ]
        }
        for i in range(3)
    ]
    return upload_dataset(live_server, name, jsonl(rows), filename="chat.jsonl")


def _facts_model(live_server: LiveServer, name: str) -> str:
    return register_base_model(live_server, name, write_model_folder(live_server.model_dir.parent / name))


def _on_phone(browser: Any, signed_in: dict[str, Any], url: str, name: str) -> None:
    """The page at phone width: it fits without sideways scrolling; a screenshot to look at."""
    phone = open_page(browser, signed_in, PHONE)
    try:
        phone.goto(url)
        assert phone.evaluate(NO_SIDEWAYS_SCROLL), (
            f"{url} scrolls sideways at {PHONE['width']} px: {phone.evaluate(WIDER_THAN_PAGE)}"
        )
        shoot(phone, f"{name}-phone")
    finally:
        phone.context.close()


def test_a_csv_with_its_own_column_names_is_mapped_in_the_form_and_previews_as_a_table(
    page: Page, live_server: LiveServer, browser: Any, signed_in: dict[str, Any]
) -> None:
    page.goto(live_server.url + "/datasets")
    expect(page.locator("#upload-form")).to_have_attribute("data-ready", "true")
    rows = [("Why is the sky blue?", "Air scatters blue light most."), ("Why does it rain?", LONG_ANSWER),
            ("What melts ice?", "Heat.")]  # fmt: skip
    csv = "query,Completion,source\n" + "".join(f'"{q}","{a}",notes\n' for q, a in rows)
    page.locator("#upload-file").set_input_files(
        files=[{"name": "data-e2e-weather.csv", "mimeType": "text/csv", "buffer": csv.encode()}]
    )
    expect(page.locator("#upload-columns")).to_have_text("Columns found in the first rows: query, Completion, source.")
    # No format has these field names: the form asks for one before offering the columns.
    expect(page.locator("#upload-mapping-hint")).to_contain_text("No row format recognised")
    page.locator("#upload-format").select_option("prompt_completion")
    prompt, completion = page.get_by_label("prompt (required)"), page.get_by_label("completion (required)")
    expect(completion).to_have_value("Completion")  # a column named as the field, but for its case
    expect(prompt).to_have_value("")
    page.locator("#upload-name").fill("data-e2e-weather")
    shoot(page, "data-upload-mapping")
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#err-map-prompt")).to_contain_text("Choose the file's column for “prompt”")
    expect(page).to_have_url(live_server.url + "/datasets")  # nothing was sent
    prompt.select_option("query")
    expect(page.locator("#upload-column-map")).to_have_value("prompt=query,completion=Completion")
    expect(page.locator("#err-map-prompt")).to_have_text("")
    page.get_by_role("button", name="Upload").click()
    expect(page).to_have_url(re.compile(r"/datasets/ds_"), timeout=WORK_TIMEOUT_MS)

    expect(page.locator("#dataset-column-map")).to_have_text("prompt=query,completion=Completion")
    expect(page.locator("#preview-count")).to_contain_text("Showing rows 1–3 of 3")
    table = page.locator("table#preview-rows")
    expect(table).to_have_attribute("data-layout", "table")
    expect(table.locator("thead th")).to_have_text(["Row", "prompt", "completion", "Raw JSON"])
    long_cell = page.locator("#preview-row-2 details.cell-long")
    expect(long_cell.locator("summary")).to_contain_text("show all")
    assert not long_cell.evaluate("el => el.open")
    long_cell.locator("summary").click()
    expect(long_cell).to_have_js_property("open", True)
    expect(long_cell.locator(":scope > .cell-text")).to_have_text(LONG_ANSWER)
    raw = page.locator("#preview-row-1 details.raw-row")
    raw.locator("summary").click()
    expect(raw.locator("pre")).to_contain_text('"prompt": "Why is the sky blue?"')
    shoot(page, "data-preview-table")
    _on_phone(browser, signed_in, page.url, "data-preview-table")
    _on_phone(browser, signed_in, live_server.url + "/datasets", "data-upload")


def test_a_chat_dataset_previews_as_bubbles_and_its_raw_json_opens(
    page: Page, live_server: LiveServer, browser: Any, signed_in: dict[str, Any]
) -> None:
    dataset_id = _chat_dataset(live_server, "data-e2e-spiders")
    page.goto(f"{live_server.url}/datasets/{dataset_id}")
    chats = page.locator("#preview-rows")
    expect(chats).to_have_attribute("data-layout", "chat")
    first = page.locator("#preview-row-1")
    bubbles = first.locator(".chat > li")
    expect(bubbles).to_have_count(3)
    expect(bubbles.locator(".bubble-role")).to_have_text(["system", "user", "assistant"])
    expect(first.locator(".bubble-user .bubble-text")).to_have_text("How many legs has a spider, number 0?")
    expect(first.locator(".bubble-assistant .bubble-text")).to_have_text("A spider has eight legs.")
    # The assistant's bubble sits on the other side from the user's.
    user_box = first.locator(".bubble-user").bounding_box()
    assistant_box = first.locator(".bubble-assistant").bounding_box()
    assert user_box is not None and assistant_box is not None and assistant_box["x"] > user_box["x"]
    raw = first.locator("details.raw-row")
    expect(raw.locator("pre")).not_to_be_visible()
    page.get_by_text("Raw JSON of row 1", exact=True).click()
    expect(raw.locator("pre")).to_be_visible()
    assert json.loads(raw.locator("pre").inner_text())["messages"][0]["role"] == "system"
    shoot(page, "data-preview-chat")
    _on_phone(browser, signed_in, page.url, "data-preview-chat")


def test_the_models_page_and_the_job_forms_picker_show_a_models_facts(
    page: Page, live_server: LiveServer, browser: Any, signed_in: dict[str, Any]
) -> None:
    model_id = _facts_model(live_server, "data-e2e-facts-llama")
    page.goto(live_server.url + "/models")
    row = page.locator(f"#model-{model_id}")
    expect(row.locator('[data-fact="parameters"]')).to_have_text(str(PARAMETERS_PER_SHARD))
    expect(row.locator('[data-fact="architecture"]')).to_have_text("LlamaForCausalLM")
    expect(row.locator('[data-fact="licence"]')).to_have_text("apache-2.0")
    expect(row.locator('[data-fact="chat-template"]')).to_have_text("yes")
    shoot(page, "data-models-facts")
    _on_phone(browser, signed_in, page.url, "data-models-facts")

    page.goto(live_server.url + "/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    facts = page.locator("#base-model-facts")
    page.locator("#f-base_model_id").select_option("")
    expect(facts).to_contain_text("Choose a base model to see")
    page.locator("#f-base_model_id").select_option(model_id)
    expect(facts).to_contain_text(f"{PARAMETERS_PER_SHARD} parameters")
    expect(facts).to_contain_text("LlamaForCausalLM · licence apache-2.0 · chat template")
    shoot(page, "data-job-form-facts")
    _on_phone(browser, signed_in, page.url, "data-job-form")


@pytest.fixture(autouse=True)
def _desktop_viewport(page: Page) -> None:
    """The screenshots are taken at the desktop size every page is tried at."""
    page.set_viewport_size(DESKTOP)
    page.set_default_timeout(UI_TIMEOUT_MS)
