"""The dashboard's words in each language, from one catalogue file per language.

Pages and scripts are written in English; the English text is the message id. A language's
catalogue (`fr.json` beside this module) maps each id to its translation, in two parts:
`pages` for the templates' `_("…")` and `scripts` for the browser scripts' `td.t("…")`
(embedded in every page, so a script never waits for its words). English needs no
catalogue. An id missing from a catalogue shows in English rather than fail the page; a test
keeps every catalogue complete.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from markupsafe import Markup, escape

from tunedeck.core.dashboard_languages import ENGLISH, LANGUAGES

PARTS = ("pages", "scripts")


@dataclass(frozen=True)
class Message:
    """An English message and the values it names, for a page to translate where it shows it (`_(message)`).

    The text is a literal given to `marked`, so that the catalogue test finds it.
    """

    text: str
    values: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Catalogue:
    """One language's translations: `pages` for templates, `scripts` for browser scripts."""

    language: str
    pages: Mapping[str, str]
    scripts: Mapping[str, str]

    def gettext(self, message: str) -> str:
        """`message` in this language (English when the catalogue lacks it)."""
        return self.pages.get(message, message)

    def translator(self) -> Callable[..., Markup]:
        """The templates' `_`: the translation, escaped, with any keyword values formatted in.

        The values are escaped too, unless they are markup already (`"<code>x</code>"|safe`):
        a translation never carries markup of its own. A `Message` brings its own values.
        """

        def translate(message: str | Message, **values: object) -> Markup:
            if isinstance(message, Message):
                values = {**message.values, **values}
                message = message.text
            text = escape(self.gettext(message))
            return text.format(**values) if values else text  # a message without values may show braces

        return translate


@cache
def catalogue(language: str) -> Catalogue:
    """The catalogue of `language` (one of LANGUAGES); English's is empty."""
    if language not in LANGUAGES:
        raise ValueError(f"no dashboard language {language!r}; expected one of {', '.join(LANGUAGES)}")
    if language == ENGLISH:
        return Catalogue(ENGLISH, {}, {})
    text = resources.files("tunedeck.web.locales").joinpath(f"{language}.json").read_text(encoding="utf-8")
    parts = json.loads(text)
    return Catalogue(language, dict(parts["pages"]), dict(parts["scripts"]))


def marked(message: str) -> str:
    """`message` as is: marks an English message that a page translates where it shows it (`_(notice)`)."""
    return message


def browser_language(accept_language: str | None) -> str:
    """The first language of an `Accept-Language` header the dashboard speaks, by weight; else English."""
    ranked: list[tuple[float, int, str]] = []
    for position, entry in enumerate((accept_language or "").split(",")):
        tag, _, params = entry.strip().partition(";")
        weight = 1.0
        if params.strip().startswith("q="):
            try:
                weight = float(params.strip()[2:])
            except ValueError:
                continue  # a malformed weight: the entry is ignored, as browsers send none such
        primary = tag.strip().split("-")[0].lower()
        if primary in LANGUAGES and weight > 0:
            ranked.append((-weight, position, primary))
    return min(ranked)[2] if ranked else ENGLISH


def page_language(chosen: str | None, accept_language: str | None) -> str:
    """The language of a page: the one the user chose, else their browser's."""
    if chosen is not None and chosen in LANGUAGES:
        return chosen
    return browser_language(accept_language)
