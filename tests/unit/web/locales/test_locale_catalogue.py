"""The dashboard's language catalogues: complete, without stale entries, and chosen as a user expects."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tunedeck.core.dashboard_languages import ENGLISH, LANGUAGES
from tunedeck.web.form_spec import form_words
from tunedeck.web.locales.catalogue import PARTS, browser_language, catalogue, page_language

WEB = Path(__file__).resolve().parents[4] / "tunedeck" / "web"
# A message is a double-quoted literal (escapes allowed) given to the marker of its part.
LITERAL = r'"((?:[^"\\]|\\.)*)"'
MARKERS = {
    "pages": [
        ("templates", "*.html", re.compile(r"\b_\(\s*" + LITERAL)),
        (".", "*.py", re.compile(r"\bmarked\(\s*" + LITERAL)),
    ],
    "scripts": [("static", "*.js", re.compile(r"\b(?:t|tunedeckWords)\(\s*" + LITERAL))],
}


def _used(part: str) -> dict[str, str]:
    """Each message `part` uses, with one file that uses it."""
    found: dict[str, str] = {}
    for folder, pattern, marker in MARKERS[part]:
        for path in sorted((WEB / folder).rglob(pattern)):
            if "vendor" in path.parts:
                continue
            for match in marker.finditer(path.read_text(encoding="utf-8")):
                found.setdefault(json.loads(f'"{match.group(1)}"'), path.name)
    if part == "pages":
        # The job form's words come from the config schema (its help is each key's description).
        for word in form_words():
            found.setdefault(word, "form_spec.py")
    return found


@pytest.mark.parametrize("language", [code for code in LANGUAGES if code != ENGLISH])
@pytest.mark.parametrize("part", PARTS)
def test_every_message_has_a_translation_and_none_is_stale(language: str, part: str) -> None:
    used = _used(part)
    assert len(used) >= 3, f"only {len(used)} {part} messages found: the markers are not found"
    translated = getattr(catalogue(language), part)
    missing = sorted(f"{message!r} ({where})" for message, where in used.items() if message not in translated)
    assert not missing, f"{language}.json lacks {len(missing)} {part} message(s):\n" + "\n".join(missing)
    stale = sorted(set(translated) - set(used))
    assert not stale, f"{language}.json has {part} messages nothing uses: {stale}"


@pytest.mark.parametrize("language", [code for code in LANGUAGES if code != ENGLISH])
def test_a_translation_keeps_the_values_of_its_message(language: str) -> None:
    for part in PARTS:
        for message, text in getattr(catalogue(language), part).items():
            # The words may move the values around, but keep each one.
            assert sorted(re.findall(r"\{\w+\}", message)) == sorted(re.findall(r"\{\w+\}", text)), (message, text)
            assert text.strip(), f"an empty translation of {message!r}"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("fr-FR,fr;q=0.9,en;q=0.8", "fr"),
        ("en-GB,en;q=0.9,fr;q=0.8", "en"),
        ("de-DE,fr;q=0.5,en;q=0.4", "fr"),
        ("de-DE", "en"),
        ("", "en"),
        (None, "en"),
        ("fr;q=0,en;q=0.1", "en"),
        ("fr;q=oops,en", "en"),
    ],
)
def test_the_browser_language_is_the_first_spoken_one_by_weight(header: str | None, expected: str) -> None:
    assert browser_language(header) == expected


def test_a_chosen_language_wins_over_the_browser() -> None:
    assert page_language("en", "fr-FR") == "en"
    assert page_language(None, "fr-FR") == "fr"
    assert page_language("xx", "fr-FR") == "fr"  # a stored value the dashboard no longer speaks


def test_translations_are_escaped_and_only_marked_values_stay_markup() -> None:
    from markupsafe import Markup

    translate = catalogue("fr").translator()
    assert str(translate("Sign in")) == "Se connecter"
    shown = translate("Revoke token {name}", name="<script>")
    assert "<script>" not in shown and "&lt;script&gt;" in shown
    assert "<code>tunedeck serve</code>" in translate(
        "Paste an API token. The first start of {command} prints one for the admin user.",
        command=Markup("<code>tunedeck serve</code>"),
    )
