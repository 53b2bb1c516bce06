"""What every dashboard page depends on: the dashboard's collaborators, the signed-in user, CSRF-checked forms.

Pages answer in HTML: not signed in → a redirect to the login page; another
user's object or an unknown id → a 404 page; a form without the right CSRF
token → a 403 page. Nothing here ever answers 500 for bad input.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from tunedeck.api.auth import Principal
from tunedeck.api.context import ApiContext
from tunedeck.core.errors import NotFoundError
from tunedeck.web.locales.catalogue import marked
from tunedeck.web.login_limits import LoginLimiter
from tunedeck.web.rendering import Renderer
from tunedeck.web.session import CSRF_FIELD, SessionCodec, csrf_matches, session_user


@dataclass
class Dashboard:
    """The long-lived collaborators of the dashboard, kept on `app.state.dashboard`."""

    context: ApiContext
    codec: SessionCodec
    renderer: Renderer
    login_limiter: LoginLimiter = field(default_factory=LoginLimiter)


@dataclass(frozen=True)
class PageSession:
    """The signed-in user of a page request and the CSRF token its forms must carry."""

    user: Principal
    csrf: str


class LoginRequired(Exception):
    """The page needs a signed-in user; carries where to come back to after signing in."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


class PageNotFound(Exception):
    """Unknown id, or an object of another user: the same 404 page for both."""


class CsrfRejected(Exception):
    """A form came without the session's CSRF token."""


def get_dashboard(request: Request) -> Dashboard:
    """Dependency: the app's Dashboard."""
    dashboard: Dashboard = request.app.state.dashboard
    return dashboard


DashboardDep = Annotated[Dashboard, Depends(get_dashboard)]


def safe_next(path: str | None) -> str:
    """A same-site path to go to after signing in; anything else (another host, a scheme) becomes /jobs."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/jobs"
    return path


def page_session(request: Request, dashboard: DashboardDep) -> PageSession:
    """Dependency: the signed-in user, or LoginRequired (→ redirect to the login page)."""
    found = session_user(request, dashboard.context, dashboard.codec)
    if found is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequired(target)
    user, session = found
    return PageSession(user=user, csrf=session.csrf)


SessionDep = Annotated[PageSession, Depends(page_session)]


async def checked_form(request: Request, session: SessionDep) -> FormData:
    """Dependency: the posted form, once its CSRF field matches the session (CsrfRejected otherwise)."""
    form = await request.form()
    presented = form.get(CSRF_FIELD)
    if not isinstance(presented, str) or not csrf_matches(session.csrf, presented):
        raise CsrfRejected()
    return form


CheckedForm = Annotated[FormData, Depends(checked_form)]


@contextmanager
def page_lookup() -> Iterator[None]:
    """Turn the store's NotFoundError into the dashboard's 404 page."""
    try:
        yield
    except NotFoundError:
        raise PageNotFound() from None


def install_page_handlers(app: FastAPI) -> None:
    """Answer the page exceptions above with a redirect or an HTML page."""

    async def login_required(request: Request, error: Exception) -> Response:
        assert isinstance(error, LoginRequired)
        return RedirectResponse(f"/login?next={quote(error.next_path, safe='/')}", status_code=303)

    async def not_found(request: Request, error: Exception) -> Response:
        renderer = get_dashboard(request).renderer
        return renderer.page(
            request, "error.html", 404, title=marked("Not found"), message=marked("There is nothing here.")
        )

    async def csrf_rejected(request: Request, error: Exception) -> Response:
        renderer = get_dashboard(request).renderer
        return renderer.page(
            request,
            "error.html",
            403,
            title=marked("Form expired"),
            message=marked(
                "This form was not sent from a current dashboard page. Go back, reload the page and try again."
            ),
        )

    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(PageNotFound, not_found)
    app.add_exception_handler(CsrfRejected, csrf_rejected)
