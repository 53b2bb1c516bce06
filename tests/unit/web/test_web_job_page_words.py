"""The job page's words that Python gathers: an early stop, the charts handed to the page's script."""

from __future__ import annotations

import pytest

from tunedeck.store.early_stop import EarlyStop
from tunedeck.web.job_view import JobPageData, client_charts
from tunedeck.web.locales.catalogue import catalogue
from tunedeck.web.locales.early_stop_words import early_stop_message


@pytest.mark.parametrize("total_steps", [None, 150])
@pytest.mark.parametrize("patience", [None, 1, 3])
def test_an_early_stop_reads_as_before_in_english_and_translates(total_steps: int | None, patience: int | None) -> None:
    stop = EarlyStop(step=120, total_steps=total_steps, metric="eval_loss", patience=patience)
    assert str(catalogue("en").translator()(early_stop_message(stop))) == stop.describe()
    french = str(catalogue("fr").translator()(early_stop_message(stop)))
    assert french.startswith("arrêt anticipé au pas 120") and "eval_loss" in french
    assert (" sur 150 " in french) == bool(total_steps)


def test_the_scripts_charts_come_in_the_pages_words_with_the_series_names_kept() -> None:
    data = JobPageData(timeline=[], logs=[], diagnoses=[], last_event_id=0, env=None, actions=())
    english = client_charts(data)
    french = client_charts(data, catalogue("fr").gettext)
    assert english[0]["title"] == "Loss" and english[0]["series"][0] == ["loss", "training loss"]
    assert french[0]["title"] == "Perte" and french[0]["series"][0] == ["loss", "perte d'entraînement"]
    assert [c["id"] for c in french] == [c["id"] for c in english]
