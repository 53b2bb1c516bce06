"""The dashboard's language: the browser's by default, the user's choice once made, kept per user."""

from __future__ import annotations

import json
import re

from tests.fixtures.app import AppHarness, sign_in

FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9,en;q=0.5"}


def test_the_browser_language_is_the_default_and_a_choice_overrides_it(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    french = web.client.get("/account", headers=FRENCH)
    assert '<html lang="fr">' in french.text and "Vos jetons" in french.text and ">Tâches</a>" in french.text
    english = web.client.get("/account")
    assert '<html lang="en">' in english.text and "Your tokens" in english.text

    chosen = web.client.post("/account/language", data={"csrf_token": csrf, "language": "en"}, follow_redirects=False)
    assert chosen.status_code == 303
    assert web.store.users.get_user(web.users["alice"].id).locale == "en"
    # The choice wins over the French browser, and is alice's only.
    assert '<html lang="en">' in web.client.get("/account", headers=FRENCH).text
    assert "The dashboard speaks the language you chose." in web.client.get(chosen.headers["location"]).text

    web.client.post("/account/language", data={"csrf_token": csrf, "language": ""})
    assert web.store.users.get_user(web.users["alice"].id).locale is None
    assert '<html lang="fr">' in web.client.get("/account", headers=FRENCH).text


def test_an_unknown_language_or_a_missing_csrf_token_changes_nothing(web: AppHarness) -> None:
    csrf = sign_in(web.client, web.tokens["alice"])
    answer = web.client.post("/account/language", data={"csrf_token": csrf, "language": "xx"}, follow_redirects=False)
    assert answer.status_code == 303 and "language=unknown" in answer.headers["location"]
    assert "not one the dashboard speaks" in web.client.get(answer.headers["location"]).text
    forged = web.client.post("/account/language", data={"language": "fr"}, follow_redirects=False)
    assert forged.status_code in (403, 400)
    assert web.store.users.get_user(web.users["alice"].id).locale is None


def test_the_french_page_embeds_the_scripts_words_and_escapes_names(web: AppHarness) -> None:
    web.store.users.issue_token(web.store.users.get_user(web.users["alice"].id), "<b>laptop</b>")
    sign_in(web.client, web.tokens["alice"])
    page = web.client.get("/account", headers=FRENCH).text
    embedded = re.search(r'<script type="application/json" id="script-words">(.*?)</script>', page, re.S)
    assert embedded is not None and json.loads(embedded.group(1))["Theme: dark"] == "Thème : sombre"
    assert "Révoquer le jeton &lt;b&gt;laptop&lt;/b&gt;" in page and "<b>laptop</b>" not in page
