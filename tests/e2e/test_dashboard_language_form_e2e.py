"""The jobs list and the job form in a French browser: filters, sort headers, sections, derived values, field errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.dashboard_inputs import chat_rows, create_job, register_inputs, wait_terminal
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.timeout(600)
MODEL_NAME = "langue-form-llama"  # names of this file's own on the session server the dashboard tests share
DATASET_NAME = "langue-form-train"
TAG = "e2e-langue-form"
OVERFLOW = "() => [document.documentElement.scrollWidth, window.innerWidth]"


@pytest.fixture(scope="module")
def french_jobs(live_server: LiveServer) -> Iterator[dict[str, str]]:
    """Two jobs tagged with this file's tag, cancelled at once (nothing trains to its end)."""
    inputs = register_inputs(live_server, MODEL_NAME, DATASET_NAME, chat_rows(1, lambda i: ("Salut", "Bonjour")))
    ids = {"model": inputs.base_model_id}
    # Each run is held at its first step until its cancel stops it: a tiny run could otherwise end first.
    live_server.hold_training_from(1)
    try:
        for name in ("langue bravo", "langue alpha"):
            ids[name] = create_job(live_server, inputs, name, {"epochs": 1, "preflight": False}, tags=[TAG])
            with live_server.api() as api:
                assert api.post(f"/jobs/{ids[name]}/cancel").status_code == 200
            # The worker may have claimed the job before the cancel came: it is cancelled once its run stops.
            assert wait_terminal(live_server, ids[name])["state"] == "cancelled"
    finally:
        live_server.release_training()
    yield ids


def _french_page(browser: Any, signed_in: dict[str, Any], viewport: dict[str, int]) -> Page:
    context = browser.new_context(viewport=viewport, storage_state=signed_in, locale="fr-FR")
    page: Page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    return page


def _no_sideways_scroll(page: Page, what: str) -> None:
    scroll, inner = page.evaluate(OVERFLOW)
    assert scroll <= inner + 1, f"{what} scrolls sideways ({scroll}px > {inner}px)"


def test_the_jobs_list_filters_and_sorts_in_french(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, french_jobs: dict[str, str]
) -> None:
    page = _french_page(browser, signed_in, DESKTOP)
    page.goto(f"{live_server.url}/jobs")
    expect(page.get_by_role("heading", name="Tâches d'entraînement")).to_be_visible()
    filters = page.get_by_role("form", name="Filtrer les tâches")
    expect(filters.get_by_role("group", name="État")).to_be_visible()
    filters.get_by_label("Étiquette").select_option(TAG)
    filters.get_by_label("Le nom contient").fill("langue")
    filters.get_by_role("button", name="Filtrer").click()
    expect(page).to_have_url(re.compile(rf"tag={TAG}"))
    table = page.locator("#jobs-table")
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(page.get_by_role("link", name="Effacer")).to_be_visible()
    # The headers are French; the sorted one says so, and its link turns the order around.
    expect(table.locator("th[data-sort=created]")).to_have_attribute("aria-sort", "descending")
    expect(table.locator("th[data-sort=created] a")).to_have_text("Créé ▼")
    expect(table.get_by_role("columnheader", name="Étiquettes")).to_be_visible()
    table.get_by_role("link", name="Nom", exact=True).click()
    expect(table.locator("th[data-sort=name]")).to_have_attribute("aria-sort", "ascending")
    expect(table.locator("th[data-sort=name] a")).to_have_text("Nom ▲")
    expect(page.get_by_label("Étiquette")).to_have_value(TAG)  # the filter stays chosen
    row = table.locator(f"tr[data-job-id='{french_jobs['langue alpha']}']")
    expect(row.locator(".state")).to_have_text("annulée")
    # The compare help is the script's, in French too.
    help_line = page.locator("#compare-help")
    expect(help_line).to_have_text(
        "Cochez de 2 à 10 tâches pour superposer leurs courbes et voir en quoi leurs configurations diffèrent."
    )
    page.get_by_label("Comparer langue alpha").check()
    expect(help_line).to_have_text("1 tâche cochée : cochez-en au moins une autre pour comparer.")
    page.get_by_label("Comparer langue bravo").check()
    expect(help_line).to_have_text("2 tâches cochées.")
    shoot(page, "language-jobs-fr-desktop")
    page.context.close()

    phone = _french_page(browser, signed_in, PHONE)
    phone.goto(f"{live_server.url}/jobs?tag={TAG}")
    expect(phone.get_by_role("button", name="Comparer la sélection")).to_be_visible()
    shoot(phone, "language-jobs-fr-phone")
    _no_sideways_scroll(phone, "the French jobs list")
    phone.context.close()


def test_the_job_form_speaks_french_down_to_its_field_errors(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, french_jobs: dict[str, str]
) -> None:
    page = _french_page(browser, signed_in, DESKTOP)
    page.goto(f"{live_server.url}/jobs/new")
    expect(page.locator("#job-form")).to_have_attribute("data-ready", "true")
    expect(page.get_by_role("heading", name="Nouvelle tâche d'entraînement")).to_be_visible()
    expect(page.get_by_role("heading", name="Réglages de base")).to_be_visible()
    expect(page.get_by_label("Nom de la tâche")).to_be_visible()
    expect(page.get_by_label("Taux d'apprentissage", exact=True)).to_be_visible()
    expect(page.locator("#help-learning_rate")).to_have_text("Taux d'apprentissage maximal. learning_rate")
    # The derived values card, with the script's note until a dataset is chosen.
    derived = page.get_by_role("region", name="Valeurs dérivées")
    expect(derived.get_by_text("Taille de lot effective")).to_be_visible()
    expect(page.locator("#derived-note")).to_have_text(re.compile(r"^Choisissez un jeu de données d'entraînement"))
    expect(page.locator("#derived-precision")).to_have_text(re.compile(r"^auto : "))
    # The Advanced section opens on its French sections, with French labels and help.
    page.get_by_role("heading", name="Avancé").click()
    optimisation = page.get_by_role("group", name="Optimisation")
    expect(optimisation).to_be_visible()
    expect(optimisation.get_by_label("Planificateur du taux d'apprentissage")).to_be_visible()
    expect(page.get_by_role("group", name="Adaptateurs (PEFT)")).to_be_visible()
    weight_decay_help = "Décroissance des poids, découplée du gradient. weight_decay"
    expect(page.locator("#help-weight_decay")).to_have_text(weight_decay_help)
    # A field's error, written by the script, is French.
    batch = page.get_by_label("Taille de lot", exact=True)
    batch.fill("0")
    batch.blur()
    too_small = re.compile(r"^Doit valoir au moins 1 \(plage valide de 1 à \d+\)\.$")
    expect(page.locator("#err-batch_size")).to_have_text(too_small)
    batch.fill("4")
    expect(page.locator("#err-batch_size")).to_have_text("")
    page.get_by_role("button", name="Créer la tâche").click()
    expect(page.locator("#err-name")).to_have_text("Donnez un nom à la tâche.")
    expect(page.locator("#form-error")).to_have_text(re.compile(r"^3 champs demandent votre attention\."))
    shoot(page, "language-job-form-fr-desktop")
    page.context.close()

    # On a phone the derived values sit below the form; their one-line summary stays in sight, in French.
    phone = _french_page(browser, signed_in, PHONE)
    phone.goto(f"{live_server.url}/jobs/new")
    expect(phone.locator("#job-form")).to_have_attribute("data-ready", "true")
    phone.get_by_label("Jeu de données d'entraînement").select_option(label=f"{DATASET_NAME} (v1, 1 lignes)")
    summary = phone.locator("#derived-summary")
    expect(summary).to_be_visible()
    expect(summary).to_have_text(re.compile(r"^Lot \d+ · \d+ pas · préchauffage \d+ · auto$"))
    expect(phone.locator("#derived-note")).to_have_text("D'après le nombre de lignes du jeu de données d'entraînement.")
    shoot(phone, "language-job-form-fr-phone")
    _no_sideways_scroll(phone, "the French job form")
    phone.get_by_role("heading", name="Avancé").click()
    expect(phone.get_by_role("group", name="Accélérateurs et machines")).to_be_visible()
    shoot(phone, "language-job-form-advanced-fr-phone")
    _no_sideways_scroll(phone, "the French job form's advanced section")
    phone.context.close()
