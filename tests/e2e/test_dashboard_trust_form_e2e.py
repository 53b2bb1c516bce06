"""What the dashboard states can be trusted: the precision `auto` gives, skipped checks, clones, early stops.

Each test makes what it looks at through the API (a base model, datasets, short jobs) on the
session's live server, then reads the pages in the browser.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.e2e import dashboard_inputs
from tests.e2e.conftest import shoot
from tests.e2e.dashboard_inputs import (
    chat_rows,
    create_job,
    register_base_model,
    tiny_run,
    upload_dataset,
    wait_terminal,
)
from tests.e2e.signing_in import PHONE, open_page, sign_in_state
from tests.fixtures.live_server import LiveServer
from tests.waiting import wait_until
from tunedeck.core.precision import AUTO_RULE
from tunedeck.core.states import JobState, WorkState

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

# Bounds on hangs only: the waits end on conditions.
pytestmark = pytest.mark.timeout(900)
TRAIN_ROWS = 12
BF16_REFUSAL = '"bf16" is not supported'
# A short run on the CPU; each test adds what it is about.
SHORT_RUN = tiny_run(gradient_accumulation_steps=1, learning_rate=0.001)
JOB_S = 600  # a short CPU run, its checks first where a test asks for them, on a loaded machine


def _rows(offset: int) -> bytes:
    return chat_rows(TRAIN_ROWS, lambda i: (f"What is {offset + i} plus {offset + i}?", f"It is {2 * (offset + i)}."))


@dataclass
class Inputs:
    """What the tests train from: two base models (the same weights) and three datasets of the admin user."""

    model_id: str
    other_model_id: str
    train_id: str
    other_train_id: str
    validation_id: str

    @property
    def training(self) -> dashboard_inputs.Inputs:
        """The first base model and training dataset, as the jobs here train on them."""
        return dashboard_inputs.Inputs(base_model_id=self.model_id, dataset_id=self.train_id)


@pytest.fixture(scope="module")
def inputs(live_server: LiveServer) -> Inputs:
    """Base models and datasets made through the API."""
    return Inputs(
        model_id=register_base_model(live_server, "trust-llama"),
        other_model_id=register_base_model(live_server, "trust-llama-b"),
        train_id=upload_dataset(live_server, "trust-train", _rows(0), filename="rows.jsonl"),
        other_train_id=upload_dataset(live_server, "trust-train-b", _rows(100), filename="rows.jsonl"),
        validation_id=upload_dataset(live_server, "trust-validation", _rows(200), filename="rows.jsonl"),
    )


def _cancel(server: LiveServer, job_id: str) -> None:
    """Stop a job the test only needed queued (it may have ended already)."""
    with server.api() as api:
        api.post(f"/jobs/{job_id}/cancel")
    wait_terminal(server, job_id, timeout_s=JOB_S)


def _preflight(api: httpx.Client, inputs: Inputs, config: dict[str, Any]) -> dict[str, Any]:
    """Run the checks before training through the API and return the ended work item."""
    answer = api.post("/preflight", json={"base_model_id": inputs.model_id, "train_dataset_id": inputs.train_id,
                                          "config": config})  # fmt: skip
    assert answer.status_code in (200, 202), answer.text
    item_id = answer.json()["id"]

    def ended() -> dict[str, Any] | None:
        item: dict[str, Any] = api.get(f"/work/{item_id}", params={"wait": 2}).json()
        return item if item["state"] not in (WorkState.QUEUED.value, WorkState.RUNNING.value) else None

    return wait_until(ended, "the checks before training to end", timeout_s=600, poll_s=0.5)


def test_the_form_says_what_auto_precision_runs_in_and_a_basic_job_is_accepted(
    browser: Any, page: Page, live_server: LiveServer, inputs: Inputs
) -> None:
    """Before any worker reported its hardware to a user, the form states the rule; after, what each worker uses."""
    with live_server.api() as api:
        newcomer = api.post("/users", json={"name": "trust-newcomer"})
        assert newcomer.status_code == 201, newcomer.text
    fresh = open_page(browser, sign_in_state(browser, live_server.url, newcomer.json()["token"]))
    fresh.goto(live_server.url + "/jobs/new")
    expect(fresh.locator("#job-form")).to_have_attribute("data-ready", "true")
    expect(fresh.locator("#derived-precision")).to_have_text("auto: " + AUTO_RULE)
    fresh.context.close()

    with live_server.api() as api:
        item = _preflight(api, inputs, {**SHORT_RUN, "mixed_precision": "auto"})
        assert item["state"] == WorkState.SUCCEEDED.value, item
    page.goto(live_server.url + "/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    # This machine's worker has no GPU: auto trains in fp32 there, as its checks reported.
    expect(page.locator("#derived-precision")).to_have_text(re.compile(r"^auto: fp32 on worker \S+ \(cpu\)"))
    page.locator("#advanced summary").click()
    page.locator("#f-mixed_precision").select_option("fp16")
    expect(page.locator("#derived-precision")).to_have_text("fp16")
    page.locator("#f-mixed_precision").select_option("auto")

    # A newcomer fills the name, the model, the data and the basic settings only: auto is sent, and accepted.
    page.locator("#f-name").fill("trust basic only")
    page.locator("#f-base_model_id").select_option(label="trust-llama")
    page.locator("#f-train_dataset_id").select_option(value=inputs.train_id)
    page.get_by_label("Max length (tokens)", exact=True).fill("64")
    page.locator("#json-view summary").click()
    assert json.loads(page.locator("#config-json").text_content() or "{}")["mixed_precision"] == "auto"
    shoot(page, "trust-form-auto-precision")
    page.locator("#submit-job").click()
    expect(page).to_have_url(re.compile(r"/jobs/job_[A-Za-z0-9_]+$"), timeout=30_000)
    job_id = page.url.rsplit("/", 1)[1]
    with live_server.api() as api:
        assert api.get(f"/jobs/{job_id}").json()["config"]["mixed_precision"] == "auto"
    # Its checks before training and its training run on this CPU worker, in fp32: nothing refuses it.
    job = wait_terminal(live_server, job_id, timeout_s=JOB_S)
    assert job["state"] == JobState.SUCCEEDED.value, job


def _expect_each_skip_says_so(page: Page) -> None:
    """Skipped rows read "skipped" and why; the failure's words are in the failed row only."""
    rows = page.locator("#preflight-checks tr")
    expect(rows.filter(has_text=BF16_REFUSAL)).to_have_count(1)
    failed = page.locator("#preflight-checks tr[data-status='fail']")
    expect(failed).to_have_count(1)
    expect(failed.locator("td").nth(2)).to_have_text("failed")
    expect(failed).to_contain_text(BF16_REFUSAL)
    skipped = page.locator("#preflight-checks tr[data-status='skip']")
    assert skipped.count() >= 4
    for index in range(skipped.count()):
        row = skipped.nth(index)
        expect(row.locator("td").nth(2)).to_have_text("skipped")
        expect(row.locator("td").nth(3)).to_contain_text("not run: an earlier check failed")


def test_a_skipped_check_says_it_was_not_run_and_the_failure_shows_once(
    page: Page, live_server: LiveServer, inputs: Inputs
) -> None:
    """bf16 on this CPU fails check 1; the checks that need it say they were not run, on the form and the job page."""
    page.goto(live_server.url + "/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    page.locator("#f-base_model_id").select_option(label="trust-llama")
    page.locator("#f-train_dataset_id").select_option(value=inputs.train_id)
    page.get_by_label("Max length (tokens)", exact=True).fill("64")
    page.get_by_label("Batch size", exact=True).fill("2")
    page.locator("#advanced summary").click()
    page.locator("#f-mixed_precision").select_option("bf16")
    page.get_by_role("button", name="Run preflight").click()
    expect(page.locator("#preflight-summary")).to_contain_text("Overall:", timeout=300_000)
    _expect_each_skip_says_so(page)
    shoot(page, "trust-form-preflight-skips")

    job_id = create_job(live_server, inputs.training, "trust refused bf16",
                        {**SHORT_RUN, "mixed_precision": "bf16", "preflight": True})  # fmt: skip
    assert wait_terminal(live_server, job_id, timeout_s=JOB_S)["state"] == JobState.FAILED.value
    page.goto(f"{live_server.url}/jobs/{job_id}")
    expect(page.locator("#preflight")).to_be_visible()
    _expect_each_skip_says_so(page)
    shoot(page, "trust-job-preflight-skips")


def test_a_clone_sends_what_view_json_shows_and_may_change_the_model_and_data(
    page: Page, live_server: LiveServer, inputs: Inputs
) -> None:
    """A field cleared in the clone form leaves its key out (its default), and the model and data can change."""
    source_id = create_job(
        live_server, inputs.training, "trust clone source",
        {**SHORT_RUN, "eval_strategy": "steps", "eval_steps": 2, "early_stopping_patience": 3},
        validation_dataset_id=inputs.validation_id,
    )  # fmt: skip
    _cancel(live_server, source_id)
    page.goto(f"{live_server.url}/jobs/new?clone={source_id}")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    page.locator("#advanced summary").click()
    patience = page.locator("#f-early_stopping_patience")
    expect(patience).to_have_value("3")
    patience.fill("")
    page.locator("#f-base_model_id").select_option(label="trust-llama-b")
    page.locator("#f-train_dataset_id").select_option(value=inputs.other_train_id)
    page.locator("#json-view summary").click()
    shown = json.loads(page.locator("#config-json").text_content() or "{}")
    assert "early_stopping_patience" not in shown and shown["eval_steps"] == 2
    shoot(page, "trust-clone-form")
    page.locator("#submit-job").click()
    expect(page).to_have_url(re.compile(r"/jobs/job_[A-Za-z0-9_]+$"), timeout=30_000)
    clone_id = page.url.rsplit("/", 1)[1]
    assert clone_id != source_id
    with live_server.api() as api:
        clone = api.get(f"/jobs/{clone_id}").json()
        other_version = api.get(f"/datasets/{inputs.other_train_id}").json()["latest"]["id"]
        _cancel(live_server, clone_id)
    assert clone["config"]["early_stopping_patience"] is None
    assert clone["config"]["eval_steps"] == 2
    assert clone["base_model_id"] == inputs.other_model_id
    assert clone["train_dataset_version_id"] == other_version
    assert clone["cloned_from"] == source_id


def test_an_early_stop_is_stated_with_a_full_bar_and_the_best_checkpoint(
    browser: Any, signed_in: dict[str, Any], page: Page, live_server: LiveServer, inputs: Inputs
) -> None:
    """A run early stopping ends after its second evaluation (none can improve by 100): the pages say so."""
    config = {
        **SHORT_RUN,
        "epochs": 3,
        "eval_strategy": "steps",
        "eval_steps": 1,
        "save_steps": 1,
        "early_stopping_patience": 1,
        "early_stopping_threshold": 100.0,
        "warmup_ratio": 0.0,  # both steps train at the set learning rate
    }
    job_id = create_job(
        live_server, inputs.training, "trust early stop", config, validation_dataset_id=inputs.validation_id
    )
    job = wait_terminal(live_server, job_id, timeout_s=JOB_S)
    assert job["state"] == JobState.SUCCEEDED.value, job
    stated = re.compile(r"stopped early at step 2 of \d+ \(no improvement in eval_loss for 1 evaluation\)")
    page.goto(f"{live_server.url}/jobs/{job_id}")
    expect(page.locator("#job-progress-text")).to_have_text(stated)
    bar = page.locator("#job-progress")
    assert bar.get_attribute("value") == bar.get_attribute("max") == "2"
    # The best of the two evaluated checkpoints (by eval_loss, whatever the threshold), named with its value.
    best = page.locator("#best-checkpoint")
    expect(best).to_contain_text(re.compile(r"Best checkpoint: step [12] \(eval_loss \d"))
    step = re.search(r"step (\d+)", best.text_content() or "")
    assert step is not None
    expect(best.get_by_role("link", name=f"step {step.group(1)}")).to_have_attribute(
        "href", f"#checkpoint-{step.group(1)}"
    )
    expect(page.locator(f"#checkpoint-{step.group(1)} .badge")).to_have_text("best")
    shoot(page, "trust-job-early-stop")
    page.goto(f"{live_server.url}/jobs")
    row = page.locator(f'tr[data-job-id="{job_id}"]')
    expect(row.locator(".early-stop")).to_contain_text(stated)
    shoot(page, "trust-jobs-early-stop")
    phone = open_page(browser, signed_in, PHONE)
    phone.goto(f"{live_server.url}/jobs/{job_id}")
    expect(phone.locator("#job-progress-text")).to_have_text(stated)
    shoot(phone, "trust-job-early-stop-phone")
    phone.context.close()
