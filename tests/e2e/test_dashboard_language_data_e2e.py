"""The datasets, dataset and base-models pages in a French browser: the upload form and its column mapping,
the dataset's preview and reports, the token inspector's check, and the models page with its facts.

Against the session's `live_server` (tests/e2e/conftest.py); every dataset and model name here is this
file's own.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS
from tests.fixtures.live_server import LiveServer
from tests.fixtures.model_folders import write_model_folder

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.timeout(600)
WORK_TIMEOUT_MS = 120_000  # the server's worker ingests the upload: slow on a loaded machine
DATASET = "langue-fr-e2e-meteo"
MODEL = "langue-fr-e2e-modele"
# The elements reaching past the viewport's right edge outside a scrolling table: what to fix when it scrolls.
WIDER_THAN_PAGE = """() => Array.from(document.querySelectorAll("body *"))
  .filter(el => el.getBoundingClientRect().right > document.documentElement.clientWidth + 1
    && !(el.parentElement && el.parentElement.closest(".table-wrap")))
  .slice(0, 8).map(el => el.tagName + "#" + el.id + "." + el.className)"""


def _french_page(browser: Any, signed_in: dict[str, Any], viewport: dict[str, int]) -> Page:
    opened: Page = browser.new_context(viewport=viewport, storage_state=signed_in, locale="fr-FR").new_page()
    opened.set_default_timeout(UI_TIMEOUT_MS)
    return opened


def _on_phone(browser: Any, signed_in: dict[str, Any], url: str, name: str) -> None:
    """The French page at phone width: it fits without sideways scrolling; a screenshot to look at."""
    phone = _french_page(browser, signed_in, PHONE)
    try:
        phone.goto(url)
        expect(phone.locator("html")).to_have_attribute("lang", "fr")
        wider = phone.evaluate(WIDER_THAN_PAGE)
        scroll, inner = phone.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner + 1, f"{url} scrolls sideways in French at {PHONE['width']} px: {wider}"
        shoot(phone, f"{name}-phone")
    finally:
        phone.context.close()


def _register_model(live_server: LiveServer) -> str:
    folder = write_model_folder(live_server.model_dir.parent / MODEL)
    with live_server.api() as api:
        made = api.post("/base-models", json={"local_path": str(folder), "name": MODEL})
        assert made.status_code == 201, made.text
        return str(made.json()["id"])


def test_a_french_browser_uploads_maps_previews_and_reads_model_facts_in_french(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer
) -> None:
    model_id = _register_model(live_server)
    page = _french_page(browser, signed_in, DESKTOP)
    try:
        # The upload form, and the column mapping the script builds from the file's header.
        page.goto(live_server.url + "/datasets")
        expect(page.locator("html")).to_have_attribute("lang", "fr")
        expect(page.get_by_role("heading", name="Jeux de données", exact=True)).to_be_visible()
        expect(page.get_by_role("heading", name="Envoyer un jeu de données")).to_be_visible()
        expect(page.locator("#upload-form")).to_have_attribute("data-ready", "true")
        expect(page.locator("#upload-file-name")).to_have_text("Aucun fichier choisi.")
        csv = "question,reponse,source\n" + "".join(
            f'"Quel temps fait-il le jour {i} ?","Il pleut le jour {i}.",notes\n' for i in range(3)
        )
        page.locator("#upload-file").set_input_files(
            files=[{"name": f"{DATASET}.csv", "mimeType": "text/csv", "buffer": csv.encode()}]
        )
        expect(page.locator("#upload-columns")).to_have_text(
            "Colonnes trouvées dans les premières lignes : question, reponse, source."
        )
        expect(page.locator("#upload-mapping-hint")).to_contain_text("Aucun format de lignes reconnu")
        page.get_by_label("Format des lignes").select_option("prompt_completion")
        expect(page.locator("#upload-mapping-hint")).to_have_text(
            "Format prompt_completion : choisissez la colonne du fichier pour chaque champ qu'il lit."
        )
        prompt = page.get_by_label("prompt (obligatoire)")
        completion = page.get_by_label("completion (obligatoire)")
        expect(prompt.locator("option").first).to_have_text("choisir une colonne…")
        page.get_by_label("Nom du jeu de données").fill(DATASET)
        submit = page.locator("#upload-submit")
        expect(submit).to_have_text("Envoyer")
        submit.click()
        expect(page.locator("#err-map-prompt")).to_have_text(
            "Choisissez la colonne du fichier pour « prompt » : le format prompt_completion en a besoin."
        )
        prompt.select_option("question")
        completion.select_option("reponse")
        expect(page.locator("#upload-column-map")).to_have_value("prompt=question,completion=reponse")
        shoot(page, "language-data-upload-fr-desktop")
        submit.click()
        expect(page).to_have_url(re.compile(r"/datasets/ds_"), timeout=WORK_TIMEOUT_MS)

        # The dataset page: its facts, preview and validation, in French; the data as given.
        dataset_url = page.url
        expect(page.get_by_role("heading", name=f"Jeu de données {DATASET}")).to_be_visible()
        expect(page.locator("#dataset-column-map")).to_have_text("prompt=question,completion=reponse")
        expect(page.locator("#preview-count")).to_have_text("Lignes 1 à 3 sur 3, sous forme canonique.")
        expect(page.locator("table#preview-rows thead th")).to_have_text(["Ligne", "prompt", "completion", "JSON brut"])
        expect(page.locator("#preview-row-1")).to_contain_text("Quel temps fait-il le jour 0 ?")
        validation = page.locator("#validation-report")
        expect(validation.get_by_role("heading", name="Validation")).to_be_visible()
        expect(validation).to_contain_text("Les 3 lignes sont toutes valides.")
        expect(page.locator("#ignored-fields")).to_have_text(
            "Champs ignorés (non utilisés pour l'entraînement) : source (3 lignes)"
        )
        for heading in ("Aperçu", "Jetons et masque de perte", "Doublons", "Données personnelles et secrets",
                        "Licence et droits", "Conservation"):  # fmt: skip
            expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        expect(page.locator("#dataset-retention-line")).to_have_text(
            "Données brutes : conservées jusqu'à ce que vous les supprimiez."
        )
        # The token inspector's own check, written by its script in the page's language.
        page.get_by_label("Tokeniser avec le modèle de base").select_option(model_id)
        page.get_by_label("Longueur maximale").fill("4")
        page.get_by_role("button", name="Inspecter").click()
        expect(page.locator("#inspect-error")).to_have_text("La longueur maximale doit être d'au moins 8.")
        shoot(page, "language-data-dataset-fr-desktop")

        # The models page: its form, the script's check, and the facts read from the model's files.
        page.goto(live_server.url + "/models")
        expect(page.get_by_role("heading", name="Modèles de base", exact=True)).to_be_visible()
        expect(page.locator("#models-table thead th")).to_have_text(
            ["Nom", "Source", "Paramètres", "Taille sur disque", "Architecture", "Licence", "Modèle de conversation",
             "Figé", "Enregistrés"]
        )  # fmt: skip
        row = page.locator(f"#model-{model_id}")
        expect(row.locator('[data-fact="architecture"]')).to_have_text("LlamaForCausalLM")
        expect(row.locator('[data-fact="licence"]')).to_have_text("apache-2.0")
        expect(row.locator('[data-fact="chat-template"]')).to_have_text("oui")
        page.get_by_label("Source", exact=True).select_option("hub")
        page.get_by_role("button", name="Enregistrer", exact=True).click()
        expect(page.locator("#err-hub_id")).to_have_text("Saisissez un identifiant de dépôt comme org/modèle.")
        shoot(page, "language-data-models-fr-desktop")
    finally:
        page.context.close()
    _on_phone(browser, signed_in, live_server.url + "/datasets", "language-data-upload-fr")
    _on_phone(browser, signed_in, dataset_url, "language-data-dataset-fr")
    _on_phone(browser, signed_in, live_server.url + "/models", "language-data-models-fr")
