"""Using a trained model from its job page: a streamed chat in the playground, and an export to download.

- The playground is a conversation: a system prompt and a message go to the fine-tuned model and the
  base model side by side; each answer streams into its own column (a streaming state while it is
  written, then cleared), a second message continues both conversations with their own answers, Stop
  ends the answers being written, and "Clear conversation" starts afresh.
- The Export section builds a chosen format with a progress bar and its text, then offers the
  new export's download, a valid zip.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.finished_runs import BASE_MODEL_NAME, FinishedRuns
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS, open_page
from tests.fixtures.live_server import LiveServer
from tests.fixtures.mlx import require_mlx
from tests.waiting import wait_until

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

# Bounds on hangs only: every wait ends on a condition.
pytestmark = pytest.mark.timeout(900)
ANSWER_MS = 180_000  # the first answer loads both models on the worker
SYSTEM_PROMPT = "You answer sums in one short sentence."
OVERFLOW = "() => [document.documentElement.scrollWidth, window.innerWidth]"
COLUMNS = ("tuned", "base")

# Records every change of the playground while it answers: each column's newest assistant bubble
# (whether it is streaming, its text's length) and the section's streaming state.
RECORD_STREAMING = """() => {
  window.streamed = [];
  const section = document.getElementById("playground");
  const snapshot = () => {
    const row = { section: section.dataset.streaming === "true" };
    for (const column of ["tuned", "base"]) {
      const bubbles = document.querySelectorAll("#playground-" + column + " .bubble-assistant");
      const last = bubbles[bubbles.length - 1];
      row[column] = last ? { streaming: last.dataset.streaming === "true",
                             length: last.querySelector(".text").textContent.length } : null;
    }
    window.streamed.push(row);
  };
  new MutationObserver(snapshot).observe(section, { subtree: true, childList: true, characterData: true,
                                                    attributes: true });
}"""
RECORD_EXPORT = """() => {
  window.exportSeen = [];
  const status = document.getElementById("export-status");
  const bar = document.getElementById("export-progress");
  const snapshot = () => window.exportSeen.push({ text: status.textContent, bar: !bar.hidden });
  const observer = new MutationObserver(snapshot);
  observer.observe(status, { subtree: true, childList: true, characterData: true });
  observer.observe(bar, { attributes: true });
}"""


@dataclass
class Trained:
    """The succeeded job the tests here use, and its base model."""

    job_id: str
    base_model_id: str


@pytest.fixture
def trained(finished_runs: FinishedRuns) -> Trained:
    """A short LoRA job trained to the end (the shared first run; its merged export is made here), and its base."""
    return Trained(job_id=finished_runs.first.job_id, base_model_id=finished_runs.inputs.base_model_id)


def _chat_requests(page: Page) -> list[dict[str, Any]]:
    """The bodies of the chat completion requests the page sends, as they are sent."""
    sent: list[dict[str, Any]] = []
    page.on("request", lambda request: sent.append(json.loads(request.post_data or "{}"))
            if request.url.endswith("/v1/chat/completions") else None)  # fmt: skip
    return sent


def _generations_under_way(server: LiveServer) -> list[str]:
    """The generation items still queued or running (a base model's answer belongs to no job)."""
    with server.api() as api:
        items = api.get("/work", params={"kind": "generate"}).json()
    return [item["id"] for item in items if item["state"] in ("queued", "running")]


def _wait_answered(page: Page) -> None:
    """Until both columns' answers ended: the streaming state is cleared and each answer has its note."""
    expect(page.locator("#playground")).to_have_attribute("data-streaming", "false", timeout=ANSWER_MS)
    for column in COLUMNS:
        newest = page.locator(f"#playground-{column} .bubble-assistant").last
        expect(newest).not_to_have_attribute("data-streaming", "true")
        expect(newest.locator(".note")).to_have_text(
            re.compile(r"^\d+ new tokens, (ended its turn|reached max new tokens)$")
        )


def _open_job(page: Page, server: LiveServer, trained: Trained) -> None:
    page.goto(f"{server.url}/jobs/{trained.job_id}")
    expect(page.locator("#playground-form")).to_have_attribute("data-ready", "true")


@contextmanager
def _job_on_phone(browser: Any, signed_in: dict[str, Any], server: LiveServer, trained: Trained, shot: str
                  ) -> Iterator[Page]:  # fmt: skip
    """The job page at phone width; once used, it must not scroll sideways, and its screenshot is `shot`."""
    phone = open_page(browser, signed_in, PHONE)
    try:
        _open_job(phone, server, trained)
        yield phone
        width, viewport = phone.evaluate(OVERFLOW)
        assert width <= viewport, f"the job page scrolls sideways on a phone: {width} > {viewport}"
        shoot(phone, shot)
    finally:
        phone.context.close()


def test_the_playground_streams_a_conversation_with_both_models(
    page: Page, browser: Any, signed_in: dict[str, Any], live_server: LiveServer, trained: Trained
) -> None:
    sent = _chat_requests(page)
    _open_job(page, live_server, trained)
    expect(page.get_by_role("list", name="Fine-tuned model")).to_contain_text("No message yet.")
    # A wrong sampling field is named before anything is sent.
    page.get_by_label("Sample (greedy decoding when off)").check()
    page.get_by_label("Top-p").fill("1.5")
    page.get_by_label("Message (a user turn)").fill("What is 2 plus 2?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#playground-error")).to_have_text("Top-p must be more than 0 and at most 1.")
    page.get_by_label("Top-p").fill("0.9")
    page.get_by_label("Sample (greedy decoding when off)").uncheck()
    expect(page.get_by_label("Top-p")).to_be_disabled()
    assert sent == []

    # The first message, with a system prompt: both columns stream their answer.
    page.get_by_label("System prompt (optional, sent first in both conversations)").fill(SYSTEM_PROMPT)
    page.get_by_label("Max new tokens").fill("24")
    page.evaluate(RECORD_STREAMING)
    page.get_by_role("button", name="Send").click()
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    _wait_answered(page)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    streamed: list[dict[str, Any]] = page.evaluate("() => window.streamed")
    for column in COLUMNS:
        seen = [row[column] for row in streamed if row[column] is not None]
        while_streaming = [row["length"] for row in seen if row["streaming"]]
        assert while_streaming, f"the {column} column never showed its answer streaming: {seen}"
        assert while_streaming[0] == 0 and while_streaming == sorted(while_streaming), while_streaming
        assert max(while_streaming) > 0, f"no text arrived in the {column} column while it streamed: {seen}"
        assert not seen[-1]["streaming"]
        chunks = int(page.locator(f"#playground-{column} .bubble-assistant").last.get_attribute("data-chunks") or 0)
        assert chunks >= 1
    assert any(row["section"] for row in streamed) and not streamed[-1]["section"]
    expect(page.locator("#playground-model-load")).to_contain_text("Fine-tuned model: ")
    assert [request["model"] for request in sent] == [f"ft:{BASE_MODEL_NAME}::{trained.job_id}", trained.base_model_id]
    for request in sent:
        assert request["stream"] is True and request["temperature"] == 0 and request["max_tokens"] == 24
        assert request["messages"] == [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "What is 2 plus 2?"},
        ]
    first_answers = {
        column: page.locator(f"#playground-{column} .bubble-assistant .text").first.text_content() for column in COLUMNS
    }
    shoot(page, "model-use-playground-first-turn")

    # A second message continues each conversation with that column's own answer.
    page.get_by_label("Message (a user turn)").fill("And 3 plus 3?")
    page.get_by_label("Message (a user turn)").press("Enter")
    _wait_answered(page)
    for title in ("Fine-tuned model", "Base model"):
        bubbles = page.get_by_role("list", name=title).get_by_role("listitem")
        expect(bubbles).to_have_count(4)
        expect(bubbles.locator(".role")).to_have_text(["You", title, "You", title])
    second = {request["model"]: request["messages"] for request in sent[2:]}
    assert len(sent) == 4
    for column, model in (("tuned", f"ft:{BASE_MODEL_NAME}::{trained.job_id}"), ("base", trained.base_model_id)):
        assert second[model] == [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "What is 2 plus 2?"},
            {"role": "assistant", "content": first_answers[column]},
            {"role": "user", "content": "And 3 plus 3?"},
        ]
    shoot(page, "model-use-playground-two-turns")

    # Stop ends the answers being written; they stay in the conversation, marked as stopped.
    page.get_by_label("Max new tokens").fill("1024")
    page.get_by_label("Message (a user turn)").fill("Count to a thousand.")
    page.get_by_role("button", name="Send").click()
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#playground")).to_have_attribute("data-streaming", "false")
    for column in COLUMNS:
        expect(page.locator(f"#playground-{column} .bubble-assistant").last.locator(".note")).to_have_text("stopped")
        expect(page.locator(f"#playground-{column}-state")).to_have_text("Stopped.")
    # The answers nobody reads any more are cancelled on the worker (the streams closed).
    wait_until(lambda: not _generations_under_way(live_server), "the stopped answers to end", timeout_s=120)

    page.get_by_role("button", name="Clear conversation").click()
    for title in ("Fine-tuned model", "Base model"):
        expect(page.get_by_role("list", name=title).get_by_role("listitem")).to_have_text(["No message yet."])
    expect(page.get_by_label("Message (a user turn)")).to_be_focused()

    # On a phone the columns stack, and a turn fits the width.
    with _job_on_phone(browser, signed_in, live_server, trained, "model-use-playground-phone") as phone:
        phone.get_by_label("Max new tokens").fill("16")
        phone.get_by_label("Message (a user turn)").fill("What is 5 plus 5?")
        phone.get_by_role("button", name="Send").click()
        _wait_answered(phone)
        phone.locator("#playground").scroll_into_view_if_needed()


def test_an_export_from_the_page_shows_its_progress_then_its_download(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, trained: Trained, tmp_path: Path
) -> None:
    context = browser.new_context(viewport=DESKTOP, storage_state=signed_in, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    try:
        _open_job(page, live_server, trained)
        expect(page.locator("#export-form")).to_have_attribute("data-ready", "true")
        expect(page.locator("#exports tbody")).to_have_attribute("data-loaded", "true")
        for title in ("Adapter", "Merged model", "Bundle"):  # every format the export API builds
            expect(page.get_by_label(title, exact=True)).to_be_enabled()
        page.get_by_label("Merged model", exact=True).check()
        page.evaluate(RECORD_EXPORT)
        page.get_by_role("button", name="Export").click()
        status = page.locator("#export-status")
        expect(status).to_have_text("Exported merged-final: it is in the list below.", timeout=300_000)
        seen: list[dict[str, Any]] = page.evaluate("() => window.exportSeen")
        shown = [row["text"] for row in seen if row["bar"]]
        assert shown and shown[0] == "Waiting for a worker…", seen  # the bar came with the phase's text
        expect(page.get_by_role("progressbar", name="Export progress")).to_be_hidden()
        download = page.get_by_role("link", name=re.compile(r"^Download merged-final \(zip, [0-9.]+ (KB|MB)\)$"))
        expect(download).to_be_visible()
        expect(page.locator('#exports tr[data-name="merged-final"]')).to_have_class(re.compile("fresh"))
        shoot(page, "model-use-export-done")
        with page.expect_download() as download_info:
            download.click()
        saved = tmp_path / "merged.zip"
        download_info.value.save_as(saved)
        assert download_info.value.suggested_filename == f"{trained.job_id}-merged-final.zip"
        with zipfile.ZipFile(saved) as archive:
            assert archive.testzip() is None  # every member reads back with its checksum
            names = archive.namelist()
            assert "config.json" in names and any(name.endswith(".safetensors") for name in names), names
            assert archive.getinfo("config.json").file_size > 0

        with _job_on_phone(browser, signed_in, live_server, trained, "model-use-export-phone") as phone:
            expect(phone.locator("#exports tbody")).to_have_attribute("data-loaded", "true")
            phone.locator("#exports-section").scroll_into_view_if_needed()
    finally:
        context.close()


def test_an_mlx_export_from_the_page_holds_the_base_and_the_adapter_for_mlx_lm(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, trained: Trained, tmp_path: Path
) -> None:
    require_mlx()
    context = browser.new_context(viewport=DESKTOP, storage_state=signed_in, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    try:
        _open_job(page, live_server, trained)
        expect(page.locator("#export-form")).to_have_attribute("data-ready", "true")
        options = page.locator("#export-mlx-options")
        expect(options).to_be_hidden()  # MLX's options show only once MLX is the format
        page.get_by_label("MLX (Apple silicon)", exact=True).check()
        expect(options).to_be_visible()
        page.get_by_label("Layout").select_option("adapter")
        page.get_by_label("Weights").select_option("float16")
        page.get_by_label("Mac unified memory (GB)").fill("16")
        page.get_by_role("button", name="Export").click()
        name = "mlx-adapter-float16-final"
        expect(page.locator("#export-status")).to_have_text(f"Exported {name}: it is in the list below.",
                                                            timeout=300_000)
        download = page.get_by_role("link", name=re.compile(rf"^Download {name} \(zip, [0-9.]+ (KB|MB)\)$"))
        expect(download).to_be_visible()
        shoot(page, "model-use-export-mlx")
        with page.expect_download() as download_info:
            download.click()
        saved = tmp_path / "mlx.zip"
        download_info.value.save_as(saved)
        with zipfile.ZipFile(saved) as archive:
            assert archive.testzip() is None
            names = set(archive.namelist())
            adapter_config = json.loads(archive.read("adapter/adapter_config.json"))
        # The base converted for mlx-lm, the adapter in mlx-lm's own format, and the pin like every export.
        assert {"config.json", "adapter/adapters.safetensors", "tunedeck_pin.json", "README.md"} <= names, names
        assert any(n.endswith(".safetensors") and not n.startswith("adapter/") for n in names), names
        assert adapter_config["fine_tune_type"] == "lora" and adapter_config["lora_parameters"]["rank"] > 0
    finally:
        context.close()
