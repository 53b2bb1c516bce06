"""Every page of the dashboard in the browser: labels, keyboard use, the recipe picker, server messages, phone width.

These make what they look at through the API (a base model, a dataset and an experiment), so they
run alone or after the end-to-end flow; the trained job they look at is the shared second run.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.dashboard_inputs import chat_rows, create_plan, register_inputs
from tests.e2e.finished_runs import FinishedRuns
from tests.e2e.signing_in import DESKTOP, PHONE
from tests.fixtures.live_server import LiveServer
from tunedeck.config.recipes import get_recipe

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

# Bounds on hangs only: the waits end on conditions.
pytestmark = pytest.mark.timeout(600)
TRAIN_ROWS = 12
PAGES_DATASET = "pages-train"
# An accessible name from label[for], a wrapping label, aria-label or aria-labelledby; hidden inputs carry none.
NAMELESS_CONTROLS = """() => {
  const controls = Array.from(document.querySelectorAll("input, select, textarea")).filter(el => el.type !== "hidden");
  const nameless = controls.filter(el => {
    const byFor = el.id && document.querySelector('label[for="' + CSS.escape(el.id) + '"]');
    const byIds = (el.getAttribute("aria-labelledby") || "").split(/\\s+/).filter(Boolean)
      .map(id => document.getElementById(id)).filter(Boolean).map(node => node.textContent).join(" ");
    const names = [byFor && byFor.textContent, el.closest("label") && el.closest("label").textContent,
                   el.getAttribute("aria-label"), byIds];
    return !names.some(name => name && name.trim());
  });
  return [controls.length, nameless.map(el => el.outerHTML.slice(0, 160))];
}"""
OVERFLOW = "() => [document.documentElement.scrollWidth, window.innerWidth]"


@dataclass
class Made:
    """What the end-to-end flow left on the server."""

    job_id: str
    dataset_id: str
    experiment_id: str
    plan_id: str


@pytest.fixture(scope="module")
def made(live_server: LiveServer, finished_runs: FinishedRuns) -> Made:
    """A base model, a dataset and an experiment made here through the API, and a job trained to the end.

    The job is the shared second run: the export test here expects its list of exports empty, and the
    other test that exports (test_dashboard_model_use_e2e.py) does so from the first.
    """
    rows = chat_rows(TRAIN_ROWS, lambda i: (f"What is {i} plus {i}?", f"It is {2 * i}."))
    inputs = register_inputs(live_server, "tiny-llama", PAGES_DATASET, rows)
    job_id = finished_runs.second.job_id
    with live_server.api() as api:
        experiment = api.post(
            "/experiments",
            json={"name": "lr sweep", "hypothesis": "A lower learning rate lowers eval loss.",
                  "reference_config": {"learning_rate": 0.001, "epochs": 6}, "guards": ["eval_loss <= baseline"]},
        )
        assert experiment.status_code == 201, experiment.text
    experiment_id = str(experiment.json()["id"])
    plan_id = create_plan(live_server, experiment_id, ("lr-1e-4", "lr-3e-4"))
    return Made(job_id=job_id, dataset_id=inputs.dataset_id, experiment_id=experiment_id, plan_id=plan_id)


def _pages(made: Made) -> dict[str, str]:
    return {
        "jobs": "/jobs",
        "job": f"/jobs/{made.job_id}",
        "job-log": f"/jobs/{made.job_id}/log",
        "job-form": "/jobs/new",
        "datasets": "/datasets",
        "dataset": f"/datasets/{made.dataset_id}",
        "models": "/models",
        "experiments": "/experiments",
        "experiment": f"/experiments/{made.experiment_id}",
        "plans": "/plans",
        "plan": f"/plans/{made.plan_id}",
        "account": "/account",
        "access-log": "/account/access-log",
        "retention": "/account/retention",
        "deletions": "/deletions",
        "deletion-confirm": f"/deletions/confirm?kind=job&target={made.job_id}",
        "api-docs": "/docs",
        "not-found": "/jobs/job_doesnotexist",
    }


def _focus_id(page: Page) -> str:
    return str(page.evaluate("() => document.activeElement.id || document.activeElement.tagName"))


def _tab_to(page: Page, target: str, path: list[str], limit: int = 120) -> None:
    """Press Tab until the element `target` (a CSS selector) has the focus, recording what got it on the way."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        path.append(_focus_id(page))
        if page.evaluate("s => document.activeElement.matches(s)", target):
            return
    raise AssertionError(f"Tab never reached {target}; the focus went through {path}")


def test_every_form_control_has_an_accessible_name(
    browser: Any, page: Page, live_server: LiveServer, made: Made
) -> None:
    login = browser.new_context(viewport=DESKTOP).new_page()
    login.goto(live_server.url + "/login")
    assert login.evaluate(NAMELESS_CONTROLS) == [1, []], "login"
    login.context.close()
    # The forms of each page, and the least number of visible controls each must have (so the check is not vacuous).
    form_pages = {"datasets": 2, "dataset": 2, "models": 3, "job-form": 40, "experiments": 4, "job": 3, "jobs": 2}
    for name, least in form_pages.items():
        page.goto(live_server.url + _pages(made)[name])
        checked, nameless = page.evaluate(NAMELESS_CONTROLS)
        assert nameless == [], f"{name}: controls without an accessible name: {nameless}"
        assert checked >= least, f"{name}: only {checked} controls found"
    page.goto(live_server.url + _pages(made)["job"])
    expect(page.get_by_label("Message (a user turn)")).to_be_visible()


def test_screenshots_at_desktop_and_phone_width_without_sideways_scroll(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, made: Made
) -> None:
    for size_name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context = browser.new_context(viewport=viewport, storage_state=signed_in)
        page = context.new_page()
        for name, path in _pages(made).items():
            answer = page.goto(live_server.url + path)
            assert answer is not None
            assert answer.status == (404 if name == "not-found" else 200), path
            if name == "job":
                expect(page.locator("#chart-loss canvas")).to_have_attribute("data-loaded", "true")
            if name == "api-docs":
                expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
            shoot(page, f"page-{name}-{size_name}")
            if size_name == "phone":
                scroll, inner = page.evaluate(OVERFLOW)
                assert scroll <= inner + 1, f"{path} scrolls sideways at phone width ({scroll}px > {inner}px)"
        # The sign-in page, as someone not signed in sees it.
        stranger = browser.new_context(viewport=viewport).new_page()
        stranger.goto(live_server.url + "/login")
        shoot(stranger, f"page-login-{size_name}")
        if size_name == "phone":
            scroll, inner = stranger.evaluate(OVERFLOW)
            assert scroll <= inner + 1, f"/login scrolls sideways at phone width ({scroll}px > {inner}px)"
        stranger.context.close()
        context.close()


def test_recipe_picker_fills_the_form_with_the_recipes_values(page: Page, live_server: LiveServer) -> None:
    page.goto(live_server.url + "/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    recipe = get_recipe("instruction-tuning-lora")
    page.get_by_label("Recipe").select_option(recipe.name)
    page.get_by_role("button", name="Fill the form").click()
    for key, value in recipe.values.items():
        control = page.locator(f"#f-{key}")
        if isinstance(value, bool) and control.evaluate("el => el.tagName") == "SELECT":
            expect(control).to_have_value(str(value).lower())  # a switch with "auto" (gradient_checkpointing)
        elif isinstance(value, bool):
            (expect(control).to_be_checked if value else expect(control).not_to_be_checked)()
        elif isinstance(value, float):
            assert float(control.input_value()) == pytest.approx(value), key
        else:
            expect(control).to_have_value(str(value))
    expect(page.locator("#derived-effective_batch_size")).to_have_text(
        str(recipe.values["batch_size"] * recipe.values["gradient_accumulation_steps"])
    )
    quick = get_recipe("quick-experiment")
    page.get_by_label("Recipe").select_option(quick.name)
    page.get_by_role("button", name="Fill the form").click()
    expect(page.locator("#f-use_peft")).not_to_be_checked()
    expect(page.locator("#f-lora_r")).to_be_hidden()  # shown only with PEFT
    expect(page.locator("#f-save_strategy")).to_have_value("no")
    # The task decides which keys show, and only those are sent: dpo's beta, never sft's packing.
    page.locator("#advanced summary").click()
    expect(page.locator("#f-packing")).to_be_visible()
    expect(page.locator("#f-beta")).to_be_hidden()
    page.get_by_label("Task").select_option("dpo")
    expect(page.locator("#f-beta")).to_be_visible()
    expect(page.locator("#f-packing")).to_be_hidden()
    expect(page.locator("#f-desirable_weight")).to_be_hidden()  # kto's
    page.get_by_label("Recipe").select_option("kto-lora")
    page.get_by_role("button", name="Fill the form").click()
    expect(page.locator("#f-loss_type")).to_have_value("kto")
    expect(page.locator("#f-desirable_weight")).to_be_visible()
    page.get_by_label("Task").select_option("dpo")
    expect(page.locator("#f-loss_type")).to_have_value("sigmoid")  # kto's loss means nothing to dpo
    page.locator("#json-view summary").click()
    sent = json.loads(page.locator("#config-json").inner_text())
    assert sent["task"] == "dpo" and sent["beta"] == 0.1 and sent["loss_type"] == "sigmoid"
    assert not {"packing", "train_on_inputs", "desirable_weight"} & set(sent)
    shoot(page, "job-form-dpo")


def test_a_json_object_field_is_parsed_in_the_browser(page: Page, live_server: LiveServer) -> None:
    """output_schema is typed as JSON: a malformed value is refused at its field, a valid one is sent as an object."""
    page.goto(live_server.url + "/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    page.locator("#advanced summary").click()
    schema = page.locator("#f-output_schema")
    schema.fill('{"type": "object",')
    schema.blur()
    expect(page.locator("#err-output_schema")).to_contain_text("Not valid JSON")
    schema.fill('{"type": "object", "required": ["vendor"]}')
    schema.blur()
    expect(page.locator("#err-output_schema")).to_have_text("")
    page.locator("#json-view summary").click()
    sent = json.loads(page.locator("#config-json").inner_text())
    assert sent["output_schema"] == {"type": "object", "required": ["vendor"]}


def test_job_form_by_keyboard_and_a_server_refusal_at_its_field(
    page: Page, live_server: LiveServer, made: Made
) -> None:
    """Tab through the form, open Advanced with Enter, tick a box with Space, submit with Enter.

    load_best_model_at_end with save_steps that are not a multiple of eval_steps passes the
    browser's checks (each value is in range) and is refused by the server: its 422 lands at
    save_steps, and no job is created.
    """
    with live_server.api() as api:
        before = len(api.get("/jobs").json()["items"])
    page.goto(live_server.url + "/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    path: list[str] = []
    _tab_to(page, "#f-name", path)
    page.keyboard.type("keyboard run")
    _tab_to(page, "#f-base_model_id", path)
    # Type-ahead picks the model by name: other dashboard tests may have registered models on the same server.
    page.keyboard.type("tiny-l")
    expect(page.locator("#f-base_model_id option:checked")).to_have_text("tiny-llama")
    _tab_to(page, "#f-train_dataset_id", path)
    for _ in range(page.locator("#f-train_dataset_id option").count()):
        if PAGES_DATASET in page.locator("#f-train_dataset_id option:checked").inner_text():
            break
        page.keyboard.press("ArrowDown")
    expect(page.locator("#f-train_dataset_id option:checked")).to_contain_text(PAGES_DATASET)
    _tab_to(page, "#f-learning_rate", path)
    _tab_to(page, "#advanced > summary", path)
    expect(page.locator("#advanced")).not_to_have_attribute("open", "")
    page.keyboard.press("Enter")
    expect(page.locator("#advanced")).to_have_attribute("open", "")
    _tab_to(page, "#f-load_best_model_at_end", path)
    page.keyboard.press("Space")
    expect(page.locator("#f-load_best_model_at_end")).to_be_checked()
    _tab_to(page, "#f-save_steps", path)
    page.keyboard.press("Control+A")
    page.keyboard.type("300")  # the default eval_steps is 250
    order = [path.index(key) for key in ("f-name", "f-base_model_id", "f-train_dataset_id", "f-learning_rate")]
    assert order == sorted(order), path
    _tab_to(page, "#submit-job", path)
    page.keyboard.press("Enter")

    error = page.locator("#err-save_steps")
    expect(error).to_contain_text("multiple of eval_steps")
    expect(page.locator("#f-save_steps")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#f-save_steps")).to_be_focused()
    expect(page).to_have_url(live_server.url + "/jobs/new")
    shoot(page, "job-form-server-refusal")
    with live_server.api() as api:
        assert len(api.get("/jobs").json()["items"]) == before


def test_new_experiment_reference_config_is_checked_at_its_field(page: Page, live_server: LiveServer) -> None:
    page.goto(live_server.url + "/experiments")
    page.get_by_label("Name").fill("bad reference")
    reference = page.get_by_label(re.compile("^Reference config"))
    reference.fill('{"learning_rate": 3}')
    page.get_by_role("button", name="Create").click()
    expect(page.locator("#err-exp-reference_config")).to_contain_text("learning_rate")
    expect(reference).to_have_attribute("aria-invalid", "true")
    expect(reference).to_have_value('{"learning_rate": 3}')  # what was typed is kept to be corrected
    reference.fill('{"learning_rate": 0.0003}')
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"/experiments/exp_"))
    expect(page.locator("#reference-config pre")).to_contain_text('"learning_rate": 0.0003')


def test_a_hub_split_registers_from_the_datasets_page(page: Page, live_server: LiveServer) -> None:
    page.goto(live_server.url + "/datasets")
    expect(page.locator("#hub-form")).to_have_attribute("data-ready", "true")
    page.get_by_label("Dataset id").fill("acme/no-such-dataset")
    page.get_by_role("button", name="Register from the hub").click()
    expect(page.locator("#hub-status")).to_contain_text("acme/no-such-dataset", timeout=30_000)
    expect(page).to_have_url(live_server.url + "/datasets")  # refused: the form stays, with the reason
    page.get_by_label("Dataset id").fill("acme/tiny-chat")
    page.locator("#hub-name").fill("hub-chat")
    page.get_by_role("button", name="Register from the hub").click()
    expect(page).to_have_url(re.compile(r"/datasets/ds_"), timeout=60_000)
    expect(page.locator("main")).to_contain_text("hub-chat")
    # The version says where its rows came from, pinned to the clone's commit.
    expect(page.locator("#dataset-hub-source")).to_contain_text("acme/tiny-chat")
    expect(page.locator("#dataset-hub-source")).to_contain_text(live_server.hub_commit)
    shoot(page, "hub-dataset-registered")


def test_run_preflight_shows_each_check_on_a_bar_then_the_report(
    page: Page, live_server: LiveServer, made: Made
) -> None:
    """The job form's "Run preflight" queues the checks for the server's worker and follows them on a bar."""
    page.goto(live_server.url + "/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    page.locator("#f-base_model_id").select_option(label="tiny-llama")
    page.locator("#f-train_dataset_id").select_option(value=made.dataset_id)
    page.get_by_label("Max length (tokens)", exact=True).fill("64")
    page.get_by_label("Batch size", exact=True).fill("2")
    page.locator("#advanced summary").click()
    page.locator("#f-mixed_precision").select_option("fp32")  # this CPU has no bf16: check 1 would say so
    # Every text the summary shows on the way, kept by the page itself (a poll could miss a short one).
    page.evaluate("""() => {
        window.summaries = [];
        const summary = document.getElementById("preflight-summary");
        new MutationObserver(() => window.summaries.push(summary.textContent))
            .observe(summary, {childList: true, characterData: true, subtree: true});
    }""")
    page.get_by_role("button", name="Run preflight").click()
    bar = page.locator("#preflight-progress")
    expect(bar).to_be_visible()
    expect(page.locator("#preflight-summary")).to_contain_text("Overall:", timeout=300_000)
    seen = page.evaluate("() => window.summaries")
    # The worker reported the checks as they ran: "Check k of 10: <what it checks>…" (interconnect only on several).
    assert any(re.fullmatch(r"Check (?:[1-9]|10) of 10: .+…", text) for text in seen), seen
    expect(page.locator("#preflight-summary")).to_contain_text("ready to train")
    expect(bar).to_be_hidden()
    expect(page.locator("#preflight-checks tr")).to_have_count(10)
    shoot(page, "page-job-form-preflight-done")


def test_export_from_the_job_page_follows_a_bar_then_lists_it_with_its_download(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, made: Made, tmp_path: Path
) -> None:
    """The succeeded LoRA job's Export section queues an adapter export, shows its progress, then lists it.

    A tiny adapter is built and stored within one of the page's polls, so the page would only see the
    queue and the end: the first finished answer it reads is handed to it as it was while storing
    (half the bytes stored, the worker's own numbers), and the poll after it is held while the bar is checked.
    """
    context = browser.new_context(viewport=DESKTOP, storage_state=signed_in, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    held: list[Any] = []

    def halfway_through_storing(route: Any) -> None:
        if held:  # the poll after the rewritten answer: held until the test has looked at the bar
            held.append(route)
            return
        answer = route.fetch()
        item = answer.json()
        progress = item.get("progress") or {}
        if item.get("state") != "succeeded" or not progress.get("total"):
            route.fulfill(response=answer)
            return
        held.append(route)
        item.update(state="running", result=None, progress={**progress, "done": progress["total"] // 2})
        route.fulfill(response=answer, json=item)

    work_polls = re.compile(r"/api/v1/work/wi_[^/?]+\?")
    page.route(work_polls, halfway_through_storing)
    page.goto(live_server.url + _pages(made)["job"])
    expect(page.locator("#export-form")).to_have_attribute("data-ready", "true")
    expect(page.locator("#exports tbody")).to_have_attribute("data-loaded", "true")  # read from GET …/exports
    expect(page.locator("#exports tbody")).to_contain_text("No export yet.")
    expect(page.get_by_label("Adapter", exact=True)).to_be_checked()  # a LoRA job: the adapter is preselected
    expect(page.locator("#export-format-adapter-help")).to_contain_text("peft")
    # A request the API refuses: its status, detail and located issue are shown at the form.
    page.locator("#export-checkpoint").evaluate("select => select.add(new Option('checkpoint -1', '-1'))")
    page.locator("#export-checkpoint").select_option("-1")
    page.get_by_role("button", name="Export").click()
    expect(page.locator("#export-error-detail")).to_have_text("The export failed: invalid request (422).")
    expect(page.locator("#export-issues li")).to_have_text(re.compile(r"^checkpoint: .*greater than or equal to 0"))
    expect(page.get_by_role("progressbar", name="Export progress")).to_be_hidden()
    shoot(page, "page-job-export-refused")
    page.locator("#export-checkpoint").select_option("")

    page.get_by_role("button", name="Export").click()
    bar = page.get_by_role("progressbar", name="Export progress")
    expect(bar).to_be_visible()
    expect(page.get_by_role("button", name="Exporting…")).to_be_disabled()
    status = page.locator("#export-status")
    expect(status).to_have_text(re.compile(r"^Storing the export… 50% \([0-9.]+ KB of [0-9.]+ KB\)$"), timeout=300_000)
    total = float(bar.get_attribute("max") or 0)
    assert total > 0 and float(bar.get_attribute("value") or -1) == total // 2
    shoot(page, "page-job-export-running")
    for _ in range(200):  # Playwright hands the page's next poll to the handler only while the test waits on it
        if len(held) == 2:
            break
        page.wait_for_timeout(50)
    assert len(held) == 2, "the page did not poll again after the storing report"
    held[1].continue_()
    page.unroute(work_polls)

    expect(status).to_have_text("Exported adapter-final: it is in the list below.")
    expect(bar).to_be_hidden()
    row = page.locator('#exports tr[data-name="adapter-final"]')
    expect(row).to_have_class(re.compile("fresh"))
    expect(row).to_contain_text("adapter")
    expect(row.locator("td").nth(2)).to_have_text(re.compile(r"^[0-9.]+ (KB|MB) in \d+ files$"))
    expect(row.locator("td").nth(3)).to_contain_text(str(live_server.model_dir))  # the base the adapter is pinned to
    expect(page.locator("#export-error-detail")).to_have_text("")  # the refusal's message went with the new request
    expect(page.locator("#export-issues li")).to_have_count(0)
    shoot(page, "page-job-export-done")
    with page.expect_download() as download_info:
        row.get_by_role("link", name="Download adapter-final (zip)").click()
    saved = tmp_path / "adapter.zip"
    download_info.value.save_as(saved)
    with zipfile.ZipFile(saved) as archive:
        assert {"adapter_model.safetensors", "adapter_config.json", "tunedeck_pin.json"} <= set(archive.namelist())
    context.close()
