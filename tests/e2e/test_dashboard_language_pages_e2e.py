"""The plans, plan, experiments, access log, deletions, retention and error pages in a French browser.

Each page shows its French heading and fits a phone's width (French words run longer than
English ones). What they show is made here through the API, under names of this file's
own: an experiment and its plan, a dataset read once (the access log) and one deleted
(the deletions), and one kept for the deletion's confirmation page.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.conftest import shoot
from tests.e2e.dashboard_inputs import create_plan
from tests.e2e.signing_in import DESKTOP, PHONE, UI_TIMEOUT_MS
from tests.fixtures.live_server import LiveServer

pytest.importorskip("playwright")
from playwright.sync_api import expect

pytestmark = pytest.mark.timeout(300)
OVERFLOW = "() => [document.documentElement.scrollWidth, window.innerWidth]"


@dataclass(frozen=True)
class Planned:
    """The experiment and the rental plan this file's pages show."""

    experiment_id: str
    plan_id: str
    kept_dataset_id: str


@pytest.fixture(scope="module")
def planned(live_server: LiveServer) -> Planned:
    """An experiment and a plan for it (its variants named, so no job is needed)."""
    with live_server.api() as api:
        experiment = api.post(
            "/experiments",
            json={"name": "language pages sweep", "hypothesis": "Une hypothèse écrite avant l'entraînement.",
                  "reference_config": {"learning_rate": 0.001}, "guards": ["eval_loss <= baseline"]},
        )  # fmt: skip
        assert experiment.status_code == 201, experiment.text
    plan_id = create_plan(live_server, str(experiment.json()["id"]), ("language-lr-1e-4", "language-lr-3e-4"))
    with live_server.api() as api:
        made = {}
        for name in ("language-pages-kept", "language-pages-deleted"):
            rows = "".join(json.dumps({"text": f"Ligne {i} d'un jeu de données."}) + "\n" for i in range(4))
            upload = api.post("/datasets", params={"wait": 120}, files={"file": ("rows.jsonl", rows.encode())},
                              data={"name": name})  # fmt: skip
            assert upload.status_code == 200, upload.text
            made[name] = upload.json()["result"]["dataset_id"]
        assert api.get(f"/datasets/{made['language-pages-kept']}/preview").status_code == 200
        assert api.delete(f"/datasets/{made['language-pages-deleted']}").status_code == 202
    return Planned(
        experiment_id=experiment.json()["id"], plan_id=plan_id, kept_dataset_id=made["language-pages-kept"]
    )


def _pages(planned: Planned) -> dict[str, tuple[str, str]]:
    """Each page's name in the screenshots: its path and its French heading."""
    return {
        "plans": ("/plans", "Plans de location"),
        "plan": (f"/plans/{planned.plan_id}", "Chronologie"),
        "experiments": ("/experiments", "Expériences"),
        "experiment": (f"/experiments/{planned.experiment_id}", "Variantes"),
        "access-log": ("/account/access-log", "Journal des accès"),
        "deletions": ("/deletions", "Suppressions"),
        "retention": ("/account/retention", "Conservation"),
        "deletion-confirm": (
            f"/deletions/confirm?kind=dataset&target={planned.kept_dataset_id}",
            "Supprimer le jeu de données language-pages-kept ?",
        ),
        "not-found": ("/jobs/job_doesnotexist", "Introuvable"),
    }


def test_each_page_reads_french_and_fits_a_phone(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, planned: Planned
) -> None:
    for size_name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        context = browser.new_context(viewport=viewport, storage_state=signed_in, locale="fr-FR")
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        for name, (path, heading) in _pages(planned).items():
            page.goto(f"{live_server.url}{path}")
            expect(page.locator("html")).to_have_attribute("lang", "fr")
            expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
            if name == "access-log":
                expect(page.locator("#access-log-table")).to_contain_text("jeu de données : language-pages-kept")
            if name == "deletions":
                expect(page.get_by_role("heading", name="jeu de données language-pages-deleted")).to_be_visible()
            shoot(page, f"language-{name}-fr-{size_name}")
            scroll, inner = page.evaluate(OVERFLOW)
            assert scroll <= inner + 1, f"the French {name} page scrolls sideways ({scroll}px > {inner}px)"
        context.close()


def test_french_forms_labels_and_refusals(
    browser: Any, signed_in: dict[str, Any], live_server: LiveServer, planned: Planned
) -> None:
    context = browser.new_context(viewport=DESKTOP, storage_state=signed_in, locale="fr-FR")
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    page.goto(f"{live_server.url}/plans/{planned.plan_id}")
    expect(page.locator("#plan-summary")).to_contain_text("Travail prévu")
    expect(page.get_by_role("button", name="La location commence maintenant")).to_be_visible()
    expect(page.locator("#phases-table th").first).to_have_text("Phase")

    # A refused plan form names the field in French, with the value it found.
    page.goto(f"{live_server.url}/plans")
    expect(page).to_have_title("Plans de location · tunedeck")
    page.get_by_label("Expérience", exact=True).select_option(planned.experiment_id)
    page.get_by_label("Lignes d'entraînement").fill("beaucoup")
    page.get_by_role("button", name="Créer le plan").click()
    expect(page.locator("#err-plan-train_rows")).to_have_text("Nombre entier attendu, trouvé 'beaucoup'.")
    expect(page.locator("#plan-error")).to_have_text(
        "Vérifiez les champs signalés ci-dessus : aucun plan n'a été créé."
    )

    # The retention form's labels and its saved notice.
    page.goto(f"{live_server.url}/account/retention")
    page.get_by_label("Supprimer entièrement une tâche terminée après ce nombre de jours").fill("")
    page.get_by_role("button", name="Enregistrer la conservation").click()
    expect(page.get_by_role("status")).to_have_text("Votre politique de conservation est enregistrée.")
    context.close()
