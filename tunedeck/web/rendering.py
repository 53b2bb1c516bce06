"""Jinja2 rendering for the dashboard: package templates, auto-escaping always on, a few display filters."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from jinja2 import ChainableUndefined, Environment, PackageLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse

from tunedeck.core.dashboard_languages import ENGLISH, LANGUAGES
from tunedeck.planning.durations import rental_duration
from tunedeck.web.locales.catalogue import Catalogue, catalogue, page_language

# Pages load scripts and styles from /static only: no inline script can run even if escaping failed.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def _number(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    number = float(value)
    if not math.isfinite(number):
        return str(number)
    return f"{number:.{digits}g}"


def _size(value: int | None) -> str:
    """Bytes as a person reads them (decimal units, as `--storage-gb` takes them)."""
    if value is None:
        return "—"
    amount = float(value)
    for unit in ("B", "kB", "MB", "GB"):
        if amount < 1000:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    return f"{amount:.1f} TB"


def make_environment() -> Environment:
    """The template environment; `autoescape=True` for every template, whatever its name."""
    env = Environment(
        loader=PackageLoader("tunedeck.web", "templates"),
        autoescape=True,
        # Stored reports are data that may lack a key: render it empty rather than fail the page.
        undefined=ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["number"] = _number
    env.filters["duration"] = format_duration
    env.filters["rental_span"] = rental_duration
    env.filters["size"] = _size
    # A macro imported without the page's context (`{% from … import … %}`) still has words: English.
    env.globals["_"] = catalogue(ENGLISH).translator()
    return env


class Renderer:
    """Renders a page template with what every page needs (the user, the CSRF token, the current path)."""

    def __init__(self, env: Environment | None = None) -> None:
        self.env = env or make_environment()

    def words(self, request: Request, user: Any) -> Catalogue:
        """The catalogue a page for `user` speaks: the user's chosen language, else the browser's.

        Its `pages` words are the template's, its `scripts` words its scripts'; a route uses it for what it
        hands a script already worded (chart titles).
        """
        return catalogue(page_language(getattr(user, "locale", None), request.headers.get("accept-language")))

    def page(self, request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        """An HTML response with the security headers set."""
        context.setdefault("user", None)
        context.setdefault("csrf_token", "")
        context.setdefault("nav", "")
        words = self.words(request, context["user"])
        html = self.env.get_template(template).render(
            request_path=request.url.path,
            _=words.translator(),
            language=words.language,
            languages=LANGUAGES,
            script_words=words.scripts,
            **context,
        )
        return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)


def format_duration(seconds: float | None) -> str:
    """`1h 05m`, `4m 10s`, `12s`; an em dash when unknown."""
    if seconds is None:
        return "—"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
