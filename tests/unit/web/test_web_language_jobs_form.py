"""The jobs list and the job form in French: headers, filters, sections, labels and help; English as before."""

from __future__ import annotations

import re
from html import unescape

import pytest

from tests.fixtures.app import AppHarness, sign_in
from tunedeck.core.precision import AUTO_RULE
from tunedeck.store.early_stop import EarlyStop
from tunedeck.web.form_spec import build_form_spec, form_words
from tunedeck.web.locales.catalogue import catalogue
from tunedeck.web.locales.early_stop_words import early_stop_message
from tunedeck.web.precision_hint import AUTO_RULE_WORDS, AutoPrecisionNote, _worker_line

FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9,en;q=0.5"}


def _text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", html))


def test_the_jobs_list_speaks_french_headers_filters_states_and_sort_links(web: AppHarness) -> None:
    web.store.jobs.enqueue(web.users["alice"], name="run <one>", config={})
    sign_in(web.client, web.tokens["alice"])
    page = _text(web.client.get("/jobs", headers=FRENCH).text)
    assert "<title>Tâches d'entraînement · tunedeck</title>" in page
    assert "<h1>Tâches d'entraînement</h1>" in page
    for words in ("<legend>État</legend>", '<label for="filter-name">Le nom contient</label>', ">Filtrer</button>",
                  ">Comparer la sélection</button>", '<label for="state-queued">en file d\'attente</label>',
                  '<span class="state state-queued">en file d\'attente</span>'):
        assert words in page, words
    # Sortable headers keep their links and aria-sort, with French titles; the others are French too.
    assert re.search(r'aria-sort="descending" data-sort="created"><a href="[^"]+">Créé', page)
    assert re.search(r'data-sort="name"><a href="[^"]+">Nom</a>', page)
    assert "<th scope=\"col\">Étiquettes</th>" in page and "<th scope=\"col\">Fin estimée</th>" in page
    # A job's name is data: shown as given (escaped), inside the French label.
    assert 'aria-label="Comparer run <one>"' in page
    english = web.client.get("/jobs").text
    assert "<h1>Training jobs</h1>" in english and ">Compare selected</button>" in english


def test_the_job_form_speaks_french_sections_labels_help_and_options(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    page = _text(web.client.get("/jobs/new", headers=FRENCH).text)
    assert "<h1>Nouvelle tâche d'entraînement</h1>" in page
    for words in (
        '<h2 id="basic-title">Réglages de base</h2>',
        "<h2>Avancé</h2>",
        "<legend>Optimisation</legend>",
        "<legend>Adaptateurs (PEFT)</legend>",
        '<label for="f-learning_rate">Taux d\'apprentissage</label>',
        "Taux d'apprentissage maximal. <code>learning_rate</code>",
        '<h2 id="derived-title">Valeurs dérivées</h2>',
        ">Créer la tâche</button>",
        ">sft — ajustement supervisé (texte, prompt/complétion, conversation)</option>",
        "<dt>Taille de lot effective</dt>",
        ">Essai rapide (GPT-2, itération rapide)</option>",
    ):
        assert words in page, words
    assert re.search(r'<option value="true"\s*>activé</option>', page)
    # Config values offered as choices are sent and shown as they are.
    assert '<option value="cosine"' in page and ">cosine</option>" in page
    # Without a worker's report, the precision note is the rule, in French.
    assert 'data-auto="bf16 là où le GPU le prend en charge, sinon fp16, sinon fp32 (décidé sur le worker)"' in page
    english = _text(web.client.get("/jobs/new").text)
    assert '<h2 id="basic-title">Basic settings</h2>' in english and f'data-auto="{AUTO_RULE}"' in english
    assert "Peak learning rate. <code>learning_rate</code>" in english


def test_the_forms_words_are_every_label_help_and_section_it_shows() -> None:
    spec = build_form_spec()
    words = form_words(spec)
    for f in spec.fields():
        assert f.label in words and f.help in words, f.key
    assert {"Basic settings", "Optimisation", "Other options"} <= words
    assert "QLoRA (4-bit base, CUDA or ROCm with bitsandbytes)" in words and "cosine" not in words
    french = catalogue("fr").pages
    assert all(word in french for word in words)


@pytest.mark.parametrize(
    "stop",
    [
        EarlyStop(step=120, total_steps=150, metric="eval_loss", patience=3),
        EarlyStop(step=120, total_steps=150, metric="eval_loss", patience=1),
        EarlyStop(step=120, total_steps=150, metric="eval_loss", patience=None),
        EarlyStop(step=120, total_steps=None, metric="eval_f1", patience=3),
        EarlyStop(step=120, total_steps=None, metric="eval_f1", patience=1),
        EarlyStop(step=120, total_steps=None, metric="eval_f1", patience=None),
    ],
)
def test_the_early_stop_sentence_is_the_same_in_english(stop: EarlyStop) -> None:
    assert str(catalogue("en").translator()(early_stop_message(stop))) == stop.describe()
    assert str(catalogue("fr").translator()(early_stop_message(stop))).startswith("arrêt anticipé au pas 120")


def test_the_precision_words_are_the_engines_rule_and_the_same_worker_line() -> None:
    assert AUTO_RULE_WORDS == AUTO_RULE == AutoPrecisionNote([]).rule
    english = catalogue("en").translator()
    hardware = {"device_name": "NVIDIA H100", "supports_bf16": True, "backend": "cuda"}
    assert str(english(_worker_line("w1", hardware))) == "bf16 on worker w1 (NVIDIA H100)"
    assert str(english(_worker_line("w2", {}))) == "fp32 on worker w2 (unknown device)"
