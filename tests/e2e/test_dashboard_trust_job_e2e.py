"""The job page keeps a person's trust: it follows the job, explains a refusal, and asks before it destroys.

- While a job trains the page shows its time left, and clears it once the job ends; when the job
  succeeds, the playground, the final model's download and the environment appear without a reload.
- A job refused by the checks before training shows each failed check once, in plain words (the
  dataset and row, the advice, no worker paths), with "Edit and resubmit" instead of a Resume.
- Cancel and "Resume from here" ask first, in a dialog; the timeline records the step a job resumed from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.dashboard_inputs import Inputs, chat_rows, create_job, register_inputs, tiny_run, wait_terminal
from tests.e2e.signing_in import PHONE
from tests.fixtures.live_server import LiveServer
from tests.waiting import wait_until
from tunedeck.core.states import JobState

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

# Bounds on hangs only: every wait ends on a condition.
pytestmark = pytest.mark.timeout(900)
TRAIN_ROWS = 12
DATASET_NAME = "job-page-train"  # unique on the session server the other dashboard tests share
SHORT_RUN = tiny_run(epochs=2, gradient_accumulation_steps=1, learning_rate=0.001, save_steps=2)
JOB_MS = 240_000  # a tiny CPU run, on a loaded machine, from queued to its end
NO_ETA = "—"
UI_MS = 15_000  # a loaded 2-core machine answers slowly; the waits still end on conditions


@pytest.fixture(scope="module")
def inputs(live_server: LiveServer) -> Inputs:
    """A base model and a small chat dataset, made through the API."""
    rows = chat_rows(TRAIN_ROWS, lambda i: (f"Please tell me what {i} plus {i} makes.", f"It is {2 * i}."))
    return register_inputs(live_server, "job-page-llama", DATASET_NAME, rows)


@pytest.fixture
def released(live_server: LiveServer) -> Iterator[None]:
    """After the test, whatever happened in it: training runs freely, and no job of it is left to hold the worker."""
    yield
    with live_server.api() as api:
        for job in api.get("/jobs").json()["items"]:
            if not JobState(job["state"]).is_terminal:
                api.post(f"/jobs/{job['id']}/cancel")
    live_server.release_training()
    with live_server.api() as api:
        for job in api.get("/jobs").json()["items"]:
            wait_terminal(live_server, job["id"], timeout_s=JOB_MS / 1000)


def _job(server: LiveServer, job_id: str) -> dict[str, Any]:
    with server.api() as api:
        return dict(api.get(f"/jobs/{job_id}").json())


def _committed_steps(server: LiveServer, job_id: str) -> list[int]:
    with server.api() as api:
        return sorted(c["step"] for c in api.get(f"/jobs/{job_id}/checkpoints").json() if c["committed"])


def test_the_page_follows_a_job_to_success_without_a_reload(
    page: Page, live_server: LiveServer, inputs: Inputs, released: None
) -> None:
    live_server.hold_training_from(5)
    job_id = create_job(live_server, inputs, "trust follows", SHORT_RUN)
    page.goto(f"{live_server.url}/jobs/{job_id}")
    expect(page.locator("#job-data")).to_have_attribute("data-ready", "true", timeout=UI_MS)
    page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloads
    expect(page.locator("#final-download")).to_have_count(0, timeout=UI_MS)

    # While it trains (held at step 5, steps 1-4 logged), the server's time left shows up.
    eta = page.locator("#job-eta")
    expect(page.locator("#job-state")).to_have_text("running", timeout=JOB_MS)
    wait_until(live_server.training_held_at, "the run to reach the held step", timeout_s=JOB_MS / 1000)
    expect(eta).not_to_have_text(NO_ETA, timeout=30_000)
    expect(eta).to_have_text(re.compile(r"\d+(s|m)"), timeout=UI_MS)
    shoot(page, "trust-job-running-eta")

    live_server.release_training()
    expect(page.locator("#job-state")).to_have_text("succeeded", timeout=JOB_MS)
    expect(eta).to_have_text(NO_ETA, timeout=UI_MS)
    # What depends on success arrives by itself: the final model, its playground entry, the environment.
    expect(page.locator("#final-download")).to_be_visible(timeout=30_000)
    expect(page.locator("#final-download")).to_have_attribute(
        "href", f"/api/v1/jobs/{job_id}/final/archive", timeout=UI_MS
    )
    expect(page.locator("#playground-checkpoint option", has_text="final model")).to_have_count(1, timeout=UI_MS)
    expect(page.locator("#job-environment pre")).to_contain_text("python", timeout=UI_MS)
    assert page.evaluate("() => window.sameDocument === true"), "the page reloaded instead of following the job"
    # The swapped-in playground works: its form is handled by script (a bare form would navigate away).
    page.get_by_label("Message (a user turn)").fill("")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#playground-error")).to_have_text("Write a message first.", timeout=UI_MS)
    shoot(page, "trust-job-succeeded-live")


def test_cancel_asks_first_and_the_time_left_goes_with_the_job(
    page: Page, live_server: LiveServer, inputs: Inputs, released: None
) -> None:
    live_server.hold_training_from(5)
    job_id = create_job(live_server, inputs, "trust cancel", SHORT_RUN)
    page.goto(f"{live_server.url}/jobs/{job_id}")
    wait_until(live_server.training_held_at, "the run to reach the held step", timeout_s=JOB_MS / 1000)
    expect(page.locator("#job-eta")).not_to_have_text(NO_ETA, timeout=30_000)

    page.get_by_role("button", name="Cancel", exact=True).click()
    dialog = page.get_by_role("dialog", name="Cancel this job?")
    expect(dialog).to_be_visible(timeout=UI_MS)
    assert page.evaluate("() => Boolean(document.activeElement.closest('dialog[open]'))"), "focus left the dialog"
    shoot(page, "trust-job-cancel-dialog")
    page.keyboard.press("Escape")  # the keyboard way out: nothing is cancelled
    expect(dialog).to_be_hidden(timeout=UI_MS)
    assert _job(live_server, job_id)["requested_action"] is None

    page.get_by_role("button", name="Cancel", exact=True).click()
    page.get_by_role("dialog", name="Cancel this job?").get_by_role("button", name="Cancel the job").click()
    expect(page.locator("#job-eta")).to_have_text(
        NO_ETA, timeout=UI_MS
    )  # a cancelled run has no time left, even while it stops
    expect(page.locator("#job-state")).to_have_text("cancelled", timeout=JOB_MS)
    expect(page.locator("#job-eta")).to_have_text(NO_ETA, timeout=UI_MS)
    assert _job(live_server, job_id)["state"] == "cancelled"


def test_resume_from_here_asks_first_and_the_timeline_names_the_step(
    browser: Any, signed_in: dict[str, Any], page: Page, live_server: LiveServer, inputs: Inputs, released: None
) -> None:
    live_server.hold_training_from(5)
    job_id = create_job(live_server, inputs, "trust resume", SHORT_RUN)
    wait_until(live_server.training_held_at, "the run to reach the held step", timeout_s=JOB_MS / 1000)
    wait_until(lambda: len(_committed_steps(live_server, job_id)) >= 2, "two committed checkpoints")
    with live_server.api() as api:
        assert api.post(f"/jobs/{job_id}/cancel").status_code == 200
    assert wait_terminal(live_server, job_id, timeout_s=JOB_MS / 1000)["state"] == "cancelled"
    steps = _committed_steps(live_server, job_id)
    oldest = steps[0]

    page.goto(f"{live_server.url}/jobs/{job_id}")
    row = page.locator(f'#checkpoints tr[data-step="{oldest}"]')
    row.get_by_role("button", name="Resume from here").click()
    dialog = page.get_by_role("dialog", name=f"Resume from step {oldest}?")
    expect(dialog).to_be_visible(timeout=UI_MS)
    expect(dialog).to_contain_text("deleted", timeout=UI_MS)
    shoot(page, "trust-job-resume-dialog")
    dialog.get_by_role("button", name="Go back").click()
    expect(dialog).to_be_hidden(timeout=UI_MS)
    assert _job(live_server, job_id)["state"] == "cancelled"

    # The same question on a phone, confirmed with the keyboard this time.
    phone = browser.new_context(viewport=PHONE, storage_state=signed_in).new_page()
    phone.set_default_timeout(15_000)
    phone.goto(f"{live_server.url}/jobs/{job_id}")
    phone.locator(f'#checkpoints tr[data-step="{oldest}"]').get_by_role("button", name="Resume from here").click()
    confirm = phone.get_by_role("dialog").get_by_role("button", name=f"Resume from step {oldest}")
    expect(confirm).to_be_visible(timeout=UI_MS)
    shoot(phone, "trust-job-resume-dialog-phone")
    # The page redraws its checkpoints table while it lives; one redraw lands while the dialog is open here.
    phone.evaluate(
        "() => { const body = document.querySelector('#checkpoints tbody'); body.replaceWith(body.cloneNode(true)); }"
    )
    confirm.press("Enter")  # focuses the button and presses Enter on it, as a keyboard user would
    expect(phone.get_by_role("dialog")).to_be_hidden(timeout=UI_MS)
    expect(phone.locator("#timeline")).to_contain_text(f"resumed from step {oldest}", timeout=2 * UI_MS)
    assert _job(live_server, job_id)["resume_from_step"] == oldest
    phone.context.close()


def test_a_preflight_refusal_reads_once_with_its_fix_and_offers_edit_and_resubmit(
    browser: Any, signed_in: dict[str, Any], page: Page, live_server: LiveServer, inputs: Inputs, released: None
) -> None:
    # max_length 8 leaves no answer token in any row: the tokenization check refuses the job, naming the rows.
    job_id = create_job(live_server, inputs, "trust refused", {**SHORT_RUN, "preflight": True, "max_length": 8})
    job = wait_terminal(live_server, job_id, timeout_s=JOB_MS / 1000)
    assert job["state"] == "failed" and "preflight failed" in (job["error"] or ""), job["error"]

    page.goto(f"{live_server.url}/jobs/{job_id}")
    refusal = page.locator("#preflight-refusal")
    expect(refusal).to_be_visible(timeout=UI_MS)
    expect(refusal.get_by_role("heading", name=re.compile("Tokenization", re.IGNORECASE))).to_be_visible(timeout=UI_MS)
    expect(refusal).to_contain_text(f"dataset “{DATASET_NAME}”, row 1", timeout=UI_MS)
    expect(refusal).to_contain_text("fix or drop the rows listed", timeout=UI_MS)
    text = page.locator("main").inner_text()
    assert "/attempt-" not in text and str(live_server.data_dir) not in text, "a worker path is shown"
    assert text.count("the answer lies beyond max_length") <= 5, "the failure is repeated"
    assert len(refusal.inner_text()) < 2500, refusal.inner_text()
    expect(page.locator("#action-resume")).to_be_hidden(timeout=UI_MS)
    shoot(page, "trust-job-preflight-refused")

    phone = browser.new_context(viewport=PHONE, storage_state=signed_in).new_page()
    phone.goto(f"{live_server.url}/jobs/{job_id}")
    expect(phone.locator("#preflight-refusal")).to_be_visible(timeout=UI_MS)
    shoot(phone, "trust-job-preflight-refused-phone")
    scroll, inner = phone.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert scroll <= inner + 1, f"the refused job's page scrolls sideways at phone width ({scroll} > {inner})"
    phone.context.close()

    page.get_by_role("link", name="Edit and resubmit").click()
    expect(page).to_have_url(re.compile(rf"/jobs/new\?clone={job_id}$"), timeout=UI_MS)
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true", timeout=UI_MS)
    expect(page.locator("#f-max_length")).to_have_value("8", timeout=UI_MS)
