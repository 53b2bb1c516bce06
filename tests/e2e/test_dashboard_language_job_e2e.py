"""A job's pages in French: the job page (its sections, charts and the words its scripts write), its full log,
and the comparison of two jobs, at desktop and phone widths, without sideways scrolling."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.finished_runs import FinishedRuns
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

# Bounds on hangs only: every wait ends on a condition.
pytestmark = pytest.mark.timeout(900)
OVERFLOW = "() => [document.documentElement.scrollWidth, window.innerWidth]"
# What sticks out past the right edge, to name in a failure: the innermost such elements.
WIDEST = """() => Array.from(document.querySelectorAll("body *"))
  .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
  .filter((el) => !(el.parentElement && el.parentElement.closest(".table-wrap, pre")))
  .filter((el) => !Array.from(el.children).some((child) => child.getBoundingClientRect().right > window.innerWidth + 1))
  .slice(0, 5).map((el) => el.tagName + "#" + el.id + "." + el.className + " " + (el.textContent || "").slice(0, 40))"""


def _french_page(browser: Any, signed_in: dict[str, Any], viewport: dict[str, int]) -> Page:
    page: Page = browser.new_context(viewport=viewport, storage_state=signed_in, locale="fr-FR").new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    return page


def _no_sideways_scroll(page: Page, what: str) -> None:
    scroll, inner = page.evaluate(OVERFLOW)
    wide = page.evaluate(WIDEST) if scroll > inner + 1 else []
    assert scroll <= inner + 1, f"the French {what} scrolls sideways ({scroll}px > {inner}px): {wide}"


@pytest.mark.parametrize(("size_name", "viewport"), [("desktop", DESKTOP), ("phone", PHONE)])
def test_a_french_browser_reads_the_job_page_its_log_and_a_comparison_in_french(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, finished_runs: FinishedRuns, size_name: str,
    viewport: dict[str, int],
) -> None:  # fmt: skip
    page = _french_page(browser, signed_in, viewport)
    first, second = finished_runs.ids
    first_name = finished_runs.first.name

    page.goto(f"{live_server.url}/jobs/{first}")
    expect(page.locator("html")).to_have_attribute("lang", "fr")
    expect(page.locator("#job-data")).to_have_attribute("data-ready", "true")
    expect(page.locator("#job-state")).to_have_text("réussie")
    for heading in ("Métriques", "Système", "Chronologie", "Journal", "Points de sauvegarde", "Bac à sable",
                    "Exporter", "Config résolue", "Environnement"):  # fmt: skip
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    expect(page.get_by_role("group", name="Réglages des graphiques")).to_be_visible()
    expect(page.get_by_label("Lissage")).to_be_visible()
    expect(page.get_by_role("button", name="Annuler le zoom")).to_be_visible()
    expect(page.locator("#chart-loss figcaption")).to_have_text("Perte")
    expect(page.get_by_role("link", name="Cloner")).to_be_visible()
    expect(page.get_by_role("link", name="Télécharger le modèle final (zip)")).to_be_visible()
    expect(page.locator("#checkpoints tbody tr[data-step] td:nth-child(2)").first).to_have_text("validé")
    # The charts' script writes its words from the same catalogue: a legend's cursor and its series' titles.
    expect(page.locator("#chart-loss .legend-x")).to_have_text("dernier")
    expect(page.locator("#chart-loss .chart-legend button").first).to_have_attribute(
        "title", "Afficher ou masquer perte d'entraînement"
    )
    expect(page.locator("#chart-loss .chart-value").first).to_contain_text("(brut ")  # smoothed, with the raw value
    shoot(page, f"language-job-fr-{size_name}")
    _no_sideways_scroll(page, "job page")

    page.get_by_role("link", name="Journal complet, recherche et téléchargement").click()
    expect(page.get_by_role("heading", name=f"Journal de {first_name}")).to_be_visible()
    expect(page.get_by_role("link", name="Télécharger tout le journal")).to_be_visible()
    page.get_by_label("Chercher", exact=True).fill("zzz-nulle-part")
    page.get_by_role("button", name="Chercher").click()
    expect(page.get_by_text("Aucune ligne ne contient « zzz-nulle-part ».")).to_be_visible()
    expect(page.locator("#log-count")).to_contain_text("lignes sur")
    shoot(page, f"language-job-log-fr-{size_name}")
    _no_sideways_scroll(page, "full log")

    page.goto(f"{live_server.url}/jobs/compare?ids={first},{second}")
    expect(page.get_by_role("heading", name="Comparer des entraînements")).to_be_visible()
    expect(page.locator("#compare-data")).to_have_attribute("data-ready", "true")
    for heading in ("Courbes", "Différences de configuration", "Métriques finales"):
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    expect(page.locator("main")).to_contain_text(f"La première, {first_name}, sert de référence")
    expect(page.locator("#config-diff tr[data-key=learning_rate]")).to_be_visible()
    expect(page.get_by_role("columnheader", name="Clé")).to_be_visible()
    expect(page.locator("#final-metrics")).to_contain_text("loss (dernière valeur enregistrée)")
    expect(page.get_by_label("Axe des x")).to_have_value("step")
    shoot(page, f"language-job-compare-fr-{size_name}")
    _no_sideways_scroll(page, "comparison")
    page.context.close()
