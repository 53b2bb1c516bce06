"""The plans, experiments, access log, deletions, retention and error pages in French: words, titles, notices."""

from __future__ import annotations

import re
from html import unescape

from tests.fixtures.app import AppHarness, sign_in
from tunedeck.web.plan_view import plan_chart

FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9,en;q=0.5"}


def _title_and_heading(page: str) -> tuple[str, str]:
    title = re.search(r"<title>(.*?)</title>", page, re.S)
    heading = re.search(r"<h1>(.*?)</h1>", page, re.S)
    assert title is not None and heading is not None
    return unescape(title.group(1)), unescape(heading.group(1))


def test_each_page_has_its_french_title_and_heading(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    expected = {
        "/plans": ("Plans de location · tunedeck", "Plans de location"),
        "/experiments": ("Expériences · tunedeck", "Expériences"),
        "/account/access-log": ("Journal des accès · tunedeck", "Journal des accès"),
        "/deletions": ("Suppressions · tunedeck", "Suppressions"),
        "/account/retention": ("Conservation · tunedeck", "Conservation"),
    }
    for path, (title, heading) in expected.items():
        answer = web.client.get(path, headers=FRENCH)
        assert answer.status_code == 200, path
        assert _title_and_heading(answer.text) == (title, heading), path
        # Markup in a message's value stays markup; the words around it are French.
        if path == "/experiments":
            assert "par ex. <code>json_valid_rate &gt;= baseline</code>)" in answer.text
        # And in English without a French browser, as before.
        assert '<html lang="en">' in web.client.get(path).text


def test_an_error_page_and_a_notice_from_a_route_are_french(web: AppHarness) -> None:
    sign_in(web.client, web.tokens["alice"])
    missing = web.client.get("/jobs/job_doesnotexist", headers=FRENCH)
    assert missing.status_code == 404
    assert _title_and_heading(missing.text) == ("Introuvable · tunedeck", "Introuvable")
    assert "Il n'y a rien ici." in unescape(missing.text) and "Retour au tableau de bord" in missing.text
    saved = web.client.get("/account/retention?saved=1", headers=FRENCH)
    assert "Votre politique de conservation est enregistrée." in saved.text


def test_a_refused_form_says_why_in_french_with_the_values_it_names(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    retention = web.client.post(
        "/account/retention", data={"csrf_token": csrf, "raw_data_days": "soon"}, headers=FRENCH
    )
    assert retention.status_code == 422
    assert "raw_data_days : nombre entier de jours de 1 à" in unescape(retention.text)
    assert "trouvé 'soon'" in unescape(retention.text)
    experiment = web.client.post("/experiments", data={"csrf_token": csrf, "name": " "}, headers=FRENCH)
    assert experiment.status_code == 422 and "Donnez un nom à l'expérience." in unescape(experiment.text)


def test_a_value_in_a_french_message_is_escaped() -> None:
    from tunedeck.web.locales.catalogue import Message, catalogue

    translate = catalogue("fr").translator()
    shown = translate(Message("Retention of dataset {name}", {"name": "<i>x</i>"}))
    assert shown == "Conservation du jeu de données &lt;i&gt;x&lt;/i&gt;"
    # A title that is no message (a job's name) shows as it is, braces included.
    assert translate("run {a}") == "run {a}"


def test_the_plan_chart_labels_are_messages_with_their_values() -> None:
    from tunedeck.web.locales.catalogue import catalogue

    plan = {
        "timeline": {
            "needed_seconds": 2 * 86400,
            "total_seconds": 1.5 * 86400,
            "margin_seconds": 0.5 * 86400,
            "margin_share": 0.25,
            "phases": [{"key": "check", "label": "Initial check", "start_s": 0, "seconds": 3600, "estimated": True}],
        }
    }
    chart = plan_chart(plan)
    translate = catalogue("fr").translator()
    assert [str(translate(tick.label)) for tick in chart.day_ticks] == ["jour 0", "jour 1", "jour 2"]
    assert str(translate(chart.bars[-1].label)) == "Marge (25%)"
    assert str(translate(chart.bars[0].title)).startswith("Initial check : ")
    assert str(translate(chart.bars[0].title)).endswith("(estimé)")


def test_every_job_state_has_words_to_show() -> None:
    from tunedeck.core.states import JobState
    from tunedeck.web.locales.catalogue import catalogue
    from tunedeck.web.locales.job_states import JOB_STATE_WORDS

    assert set(JOB_STATE_WORDS) == {state.value for state in JobState}
    assert all(catalogue("fr").gettext(word) != word for word in JOB_STATE_WORDS.values())
