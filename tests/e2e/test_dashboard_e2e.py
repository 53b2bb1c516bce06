"""The dashboard in a real browser against the real server and its embedded worker.

One flow, as a person would go: sign in, register a base model, upload data and
read its reports and loss mask, fill the job form (every job config key, advanced options,
PEFT/QLoRA, validation and early stopping, an invalid value blocked at its
field), run the job, pause and resume it, watch it succeed with its loss chart
drawn, and download a checkpoint.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.fixtures.live_server import LiveServer
from tests.waiting import wait_until

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

# Bounds on hangs only: every wait below ends on a condition, however fast or slow the machine.
pytestmark = pytest.mark.timeout(900)
TRAIN_ROWS = 40
JOB_TIMEOUT_MS = 240_000
SAVE_STEPS = 5
HOLD_STEP = SAVE_STEPS + 1  # the run waits here, its first checkpoint saved, until the test pauses it


def _chat_rows(n: int) -> list[dict[str, Any]]:
    return [
        {"messages": [{"role": "user", "content": f"What is {i} plus {i}?"},
                      {"role": "assistant", "content": f"It is {2 * i}."}]}
        for i in range(n)
    ]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _sign_in(page: Page, server: LiveServer) -> None:
    page.goto(server.url + "/jobs")
    expect(page).to_have_url(re.compile(r"/login\?next=/jobs$"))
    page.get_by_label("API token").fill("tdk_wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#login-error")).to_contain_text("not valid")
    shoot(page, "01-login-error")
    page.get_by_label("API token").fill(server.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(server.url + "/jobs")


def _register_model(page: Page, server: LiveServer) -> None:
    page.goto(server.url + "/models")
    page.get_by_label("Display name").fill("walkthrough-llama")
    page.get_by_label("Folder path (absolute)").fill("relative/path")
    page.get_by_role("button", name="Register").click()
    expect(page.locator("#err-local_path")).to_contain_text("not an absolute path")
    page.get_by_label("Folder path (absolute)").fill("/no/such/model")
    page.get_by_role("button", name="Register").click()
    expect(page.locator("#err-local_path")).to_contain_text("not a model folder")
    page.get_by_label("Folder path (absolute)").fill(str(server.model_dir))
    page.get_by_role("button", name="Register").click()
    expect(page.get_by_role("cell", name="walkthrough-llama")).to_be_visible()
    shoot(page, "02-models")


def _upload(page: Page, server: LiveServer, file: Path, name: str) -> None:
    page.goto(server.url + "/datasets")
    page.locator("#upload-file").set_input_files(str(file))
    page.get_by_label("Dataset name").fill(name)
    page.get_by_role("button", name="Upload").click()


def _expect_resume_on_every_checkpoint(page: Page) -> None:
    """After the page's periodic refresh, each committed checkpoint row offers "Resume from here" at its step."""
    body = page.locator("#checkpoints tbody")
    committed = body.locator("tr[data-step]", has=page.get_by_role("link", name="zip"))
    expect(committed).not_to_have_count(0)
    seen = int(body.get_attribute("data-refreshes") or 0)
    page.wait_for_function(
        "n => Number(document.querySelector('#checkpoints tbody').dataset.refreshes || 0) > n", arg=seen
    )
    steps = [int(step) for step in committed.evaluate_all("rows => rows.map(r => r.dataset.step)")]
    assert len(steps) >= 2, f"expected an older checkpoint besides the pause's, found steps {steps}"
    for step in steps:
        form = body.locator(f'tr[data-step="{step}"] form[action$="/resume"]')
        expect(form.get_by_role("button", name="Resume from here")).to_be_visible()
        expect(form.locator('input[name="from_step"]')).to_have_value(str(step))
    older = body.locator(f'tr[data-step="{min(steps)}"] button')
    expect(older).to_have_attribute("title", re.compile("later checkpoints"))


def test_dashboard_end_to_end(live_server: LiveServer, browser: Any, tmp_path: Path) -> None:
    server = live_server
    context = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    _sign_in(page, server)
    _register_model(page, server)
    base_model_id = next(m["id"] for m in server.api().get("/base-models").json() if m["name"] == "walkthrough-llama")

    # A file with a bad row is refused with the line of each problem.
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}\n'
                   '{"nothing": 1}\n', encoding="utf-8")
    _upload(page, server, bad, "broken")
    expect(page.locator("#upload-issues")).to_be_visible(timeout=30_000)
    expect(page.locator("#upload-issues tbody tr").first).to_contain_text("2")
    shoot(page, "03-datasets-upload-refused")

    train_file = _write_jsonl(tmp_path / "train.jsonl", _chat_rows(TRAIN_ROWS))
    _upload(page, server, train_file, "chat-train")
    expect(page).to_have_url(re.compile(r"/datasets/ds_"), timeout=30_000)
    train_id = page.url.rsplit("/", 1)[-1]
    expect(page.locator("#validation-report")).to_contain_text(f"All {TRAIN_ROWS} rows are valid")
    expect(page.locator("#preview-rows li").first).to_contain_text("What is 0 plus 0?")
    # The loss-mask view: the dataset tokenized by the chosen base model, in an engine process.
    page.locator("#inspect-base_model_id").select_option(base_model_id)
    page.locator("#inspect-max_length").fill("64")
    page.get_by_role("button", name="Inspect", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/datasets/{train_id}\?version=1&model={base_model_id}"), timeout=60_000)
    expect(page.locator("#inspection .tok.trained").first).to_be_visible()
    expect(page.locator("#inspection .tok.masked").first).to_be_visible()
    expect(page.locator("#length-histogram rect").first).to_be_attached()
    shoot(page, "04-dataset-report-loss-mask")

    val_file = _write_jsonl(tmp_path / "val.jsonl", _chat_rows(8))
    _upload(page, server, val_file, "chat-val")
    expect(page).to_have_url(re.compile(r"/datasets/ds_"), timeout=30_000)
    page.goto(server.url + "/datasets")
    expect(page.locator("#datasets-table")).to_contain_text("chat-val")
    shoot(page, "05-datasets")

    # The job form: basic fields visible, advanced collapsed.
    page.goto(server.url + "/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    for label in ("Learning rate", "Batch size", "Epochs", "Max length (tokens)"):
        expect(page.get_by_label(label, exact=True)).to_be_visible()
    expect(page.locator("#advanced")).not_to_have_attribute("open", "")
    expect(page.locator("#f-gradient_accumulation_steps")).to_be_hidden()
    shoot(page, "06-job-form-collapsed")

    page.get_by_label("Job name").fill("e2e run")
    page.get_by_label("Base model").select_option(label="walkthrough-llama")
    page.get_by_label("Training dataset").select_option(label=f"chat-train (v1, {TRAIN_ROWS} rows)")
    page.locator("#advanced > summary").click()
    expect(page.locator("#f-gradient_accumulation_steps")).to_be_visible()
    peft = page.get_by_label("Use PEFT (train an adapter)")
    peft.uncheck()
    expect(page.locator("#f-peft_method")).to_be_hidden()
    peft.check()
    expect(page.locator("#f-peft_method")).to_be_visible()
    page.get_by_label("PEFT method").select_option("qlora")
    expect(page.locator("#f-lora_r")).to_be_visible()
    page.get_by_label("Validation dataset").select_option(label="chat-val (v1, 8 rows)")
    page.get_by_label("Early stopping patience").fill("3")

    # An invalid value: its message at the field, and nothing is sent.
    page.get_by_label("Learning rate", exact=True).fill("5")
    page.get_by_role("button", name="Create job").click()
    expect(page.locator("#err-learning_rate")).to_contain_text("at most 1")
    expect(page.get_by_label("Learning rate", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page).to_have_url(server.url + "/jobs/new")
    shoot(page, "07-job-form-invalid")
    assert [job for job in server.api().get("/jobs").json()["items"] if job["name"] == "e2e run"] == []

    # Too few steps: said while the form is filled, not after the run (a single step is never warmup).
    page.get_by_label("Batch size", exact=True).fill("64")
    page.get_by_label("Epochs", exact=True).fill("1")
    expect(page.locator("#derived-warnings")).to_contain_text("Only 1 optimizer step(s)")
    expect(page.locator("#derived-warnings")).not_to_contain_text("are warmup")

    # A valid, small CPU run (QLoRA needs CUDA, so the run itself uses LoRA): 40 steps, enough for a
    # checkpoint before the pause, evaluations, and a loss chart of many points, and no more.
    values = {
        "Learning rate": "0.001", "Batch size": "2", "Epochs": "2", "Max length (tokens)": "64",
        "Gradient accumulation steps": "1", "Save steps": str(SAVE_STEPS), "Eval steps": "10", "Logging steps": "1",
    }
    for label, value in values.items():
        page.get_by_label(label, exact=True).fill(value)
    page.get_by_label("PEFT method").select_option("lora")
    page.get_by_label("Mixed precision").select_option("fp32")
    page.get_by_label("Gradient checkpointing").select_option("false")
    page.get_by_label("Preflight", exact=True).uncheck()  # measured by its own API test; keeps this one short
    expect(page.get_by_label("Packing", exact=True)).to_have_value("auto")  # the default: each batch packed
    page.get_by_label("Packing", exact=True).select_option("false")
    # Devices: "auto" or a count, sent as a number; FSDP's own options only show for strategy fsdp.
    devices = page.get_by_label("Devices (GPUs) per machine", exact=True)
    expect(devices).to_have_attribute("placeholder", re.compile("auto"))
    devices.fill("0")
    expect(page.locator("#f-fsdp_cpu_offload")).to_be_hidden()
    page.get_by_label("Strategy", exact=True).select_option("fsdp")
    expect(page.locator("#f-fsdp_cpu_offload")).to_be_visible()
    page.get_by_label("Strategy", exact=True).select_option("auto")
    expect(page.locator("#derived-steps_per_epoch")).to_have_text("20")
    expect(page.locator("#derived-total_steps")).to_have_text("40")
    expect(page.locator("#derived-warnings")).to_be_hidden()
    expect(page.locator("#err-learning_rate")).to_have_text("")  # the message clears once the value is valid
    expect(page.locator("#derived-effective_batch_size")).to_have_text("2")
    page.locator("#json-view > summary").click()
    sent = json.loads(page.locator("#config-json").inner_text())
    assert sent["use_peft"] is True and sent["peft_method"] == "lora"
    assert sent["validation_dataset_id"] and sent["early_stopping_patience"] == 3
    assert sent["learning_rate"] == 0.001 and sent["eval_steps"] == 10
    assert sent["packing"] is False  # a switch beside "auto" is sent as a boolean
    assert sent["devices"] == 0 and "fsdp_cpu_offload" not in sent  # a count as a number; hidden keys left out
    assert page.locator("#lr-schedule").get_attribute("data-points") not in (None, "0")
    expect(page.locator("#lr-schedule canvas")).to_have_count(1)  # uPlot drew the schedule in its container
    shoot(page, "08-job-form-filled")
    # The run stops at HOLD_STEP and stays "running" there until the pause below: the test, not
    # the machine's speed, decides that the job is still running when Pause is pressed.
    server.hold_training_from(HOLD_STEP)
    page.get_by_role("button", name="Create job").click()
    expect(page).to_have_url(re.compile(r"/jobs/job_"), timeout=30_000)
    job_url = page.url

    # Pause a running job, then resume it.
    expect(page.locator("#job-state")).to_have_text("running", timeout=JOB_TIMEOUT_MS)
    # Points arrive through the event stream, with no reload (the page's CSP forbids evaluated strings).
    expect(page.locator("#chart-loss canvas")).to_have_attribute(
        "data-points", re.compile(r"^([2-9]|\d{2,})$"), timeout=JOB_TIMEOUT_MS
    )
    # One committed checkpoint before the pause, so the paused job has an older one besides the pause's own.
    expect(page.locator("#checkpoints a", has_text="zip").first).to_be_visible(timeout=JOB_TIMEOUT_MS)
    assert wait_until(server.training_held_at, "the run to reach its hold step") == HOLD_STEP
    expect(page.locator("#job-state")).to_have_text("running")
    shoot(page, "09-job-running")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#job-state")).to_have_text(re.compile("pausing|paused"))
    expect(page.locator("#job-state")).to_have_text("paused", timeout=JOB_TIMEOUT_MS)
    expect(page.get_by_role("button", name="Resume", exact=True)).to_be_visible()
    _expect_resume_on_every_checkpoint(page)
    shoot(page, "10-job-paused")
    server.release_training()
    page.get_by_role("button", name="Resume", exact=True).click()
    expect(page.locator("#job-state")).to_have_text(re.compile("queued|running"))
    expect(page.locator("#job-state")).to_have_text("succeeded", timeout=JOB_TIMEOUT_MS)
    page.reload()
    loss_canvas = page.locator("#chart-loss canvas")
    expect(loss_canvas).to_have_attribute("data-loaded", "true")  # the series comes from the metrics API
    points = int(loss_canvas.get_attribute("data-points") or 0)
    assert points >= 10, points
    expect(page.locator("#timeline")).to_contain_text("phase training")
    expect(page.locator("#devices")).to_contain_text("Strategy none")  # where the run's one process ran
    expect(page.locator("#devices tbody tr")).to_have_count(1)
    expect(page.locator("#devices tbody")).to_contain_text("cpu")
    shoot(page, "11-job-succeeded")

    # The playground: the base and the fine-tuned model answer the same message side by side.
    page.get_by_label("Message (a user turn)").fill("What is 2 plus 2?")
    page.locator("#playground-max_new_tokens").fill("8")
    page.get_by_role("button", name="Send", exact=True).click()
    for column in ("tuned", "base"):
        answer = page.locator(f"#playground-{column} .bubble-assistant")
        expect(answer.locator(".note")).to_contain_text("new tokens", timeout=90_000)
        assert int(answer.get_attribute("data-new-tokens") or -1) >= 0
    shoot(page, "11b-job-playground")

    link = page.locator("#checkpoints a", has_text="zip").first
    with page.expect_download() as download_info:
        link.click()
    saved = tmp_path / "checkpoint.zip"
    download_info.value.save_as(saved)
    with zipfile.ZipFile(saved) as archive:
        assert "trainer_state.json" in archive.namelist()

    page.goto(server.url + "/jobs")
    row = page.locator("#jobs-table tr", has_text="e2e run")
    expect(row).to_contain_text("succeeded")
    shoot(page, "12-jobs-list")

    phone = browser.new_context(viewport={"width": 390, "height": 844}, storage_state=context.storage_state())
    small = phone.new_page()
    small.goto(job_url)
    expect(small.locator("#job-state")).to_have_text("succeeded")
    width = small.evaluate("document.documentElement.scrollWidth")
    assert width <= 400, f"the job page scrolls sideways at phone width ({width}px)"
    shoot(small, "13-job-phone")
    small.goto(server.url + "/jobs/new")
    assert small.evaluate("document.documentElement.scrollWidth") <= 400
    shoot(small, "14-job-form-phone")
    phone.close()
    context.close()
