"""The datasets, dataset and base-models pages in French: their words, notices and facts, values left as given."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.app import API, AppHarness, sign_in, uploaded_id
from tests.fixtures.model_folders import write_model_folder

FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9"}


def test_the_dataset_pages_speak_french_and_keep_the_data_as_given(web: AppHarness) -> None:
    rows = [{"prompt": f"Question {i}", "completion": f"Réponse {i}", "source_note": "faq"} for i in range(3)]
    answer = web.upload("alice", "".join(json.dumps(row) + "\n" for row in rows).encode(), name="faq-fr")
    dataset_id = uploaded_id(answer)
    csrf = sign_in(web.client, web.tokens["alice"])

    listing = web.client.get("/datasets", headers=FRENCH).text
    assert "<title>Jeux de données · tunedeck</title>" in listing
    assert "Envoyer un jeu de données" in listing and "Format des lignes" in listing and ">détecter<" in listing
    assert "<td>non renseignée</td>" in listing and ">faq-fr</a>" in listing
    assert "Upload a dataset" not in listing and "Your datasets" not in listing

    page = web.client.get(f"/datasets/{dataset_id}", headers=FRENCH).text
    assert "<h1>Jeu de données faq-fr</h1>" in page
    assert "Les 3 lignes sont toutes valides." in page
    assert "Champs ignorés (non utilisés pour l&#39;entraînement) : source_note (3 lignes)" in page
    assert "Lignes 1 à 3 sur 3, sous forme canonique." in page and "Question 0" in page
    assert "Données brutes : conservées jusqu&#39;à ce que vous les supprimiez." in page
    assert "Showing rows" not in page and "rows are valid" not in page

    refused = web.client.post(
        f"/datasets/{dataset_id}/rights", data={"csrf_token": csrf, "licence": "cc\x07by"}, headers=FRENCH
    )
    assert refused.status_code == 422
    assert "licence : expected one line of text without control characters" in refused.text  # the rule stays English
    saved = web.client.post(
        f"/datasets/{dataset_id}/rights", data={"csrf_token": csrf, "licence": "mit"}, headers=FRENCH
    )
    assert "La licence et la note sur les droits de ce jeu de données ont été enregistrées." in saved.text

    english = web.client.get(f"/datasets/{dataset_id}").text
    assert "All 3 rows are valid." in english
    assert "Ignored fields (not used for training): source_note (3 rows)" in english


def test_the_models_page_speaks_french_for_known_and_unknown_facts(web: AppHarness, tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "facts-fr", chat_template=False, licence=None)
    registered = web.client.post(
        f"{API}/base-models", headers=web.auth("alice"), json={"local_path": str(folder), "name": "modèle local"}
    )
    assert registered.status_code == 201, registered.text
    web.base_model("alice")  # a hub model no worker fetched yet
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/models", headers=FRENCH).text
    assert "<h1>Modèles de base</h1>" in page and "Taille sur disque" in page
    assert 'data-fact="licence">absente de ses fichiers<' in page
    assert 'data-fact="chat-template">non<' in page
    assert "encore inconnu : aucun worker n&#39;a récupéré ce modèle du hub sur ce serveur" in page
    assert "LlamaForCausalLM" in page and "modèle local" in page
    assert "not known" not in page and "Register a base model" not in page
    english = web.client.get("/models").text
    assert "not known yet: a worker has not fetched this hub model on this server" in english
