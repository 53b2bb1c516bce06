"""Sign in with an API token (→ session cookie), sign out, and the front door."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from tunedeck.web.page_deps import CheckedForm, DashboardDep, safe_next
from tunedeck.web.session import (
    COOKIE_NAME,
    CSRF_FIELD,
    LOGIN_COOKIE_NAME,
    LOGIN_FORM_SECONDS,
    SESSION_SECONDS,
    session_user,
    set_cookie,
)

router = APIRouter(include_in_schema=False)
MAX_TOKEN_LENGTH = 200


@router.get("/")
def front_door(request: Request, dashboard: DashboardDep) -> Response:
    """Signed in: the jobs list; otherwise the login page."""
    signed_in = session_user(request, dashboard.context, dashboard.codec) is not None
    return RedirectResponse("/jobs" if signed_in else "/login", status_code=303)


def _login_page(
    request: Request, dashboard: DashboardDep, *, next_path: str, error: str | None, status: int
) -> Response:
    cookie, nonce = dashboard.codec.new_login_nonce()
    response = dashboard.renderer.page(
        request, "login.html", status, title="Sign in", login_nonce=nonce, next_path=next_path, error=error
    )
    set_cookie(response, request, LOGIN_COOKIE_NAME, cookie, LOGIN_FORM_SECONDS)
    return response


@router.get("/login")
def login_form(request: Request, dashboard: DashboardDep, next: str | None = None) -> Response:
    """The sign-in form."""
    return _login_page(request, dashboard, next_path=safe_next(next), error=None, status=200)


@router.post("/login")
async def login(request: Request, dashboard: DashboardDep) -> Response:
    """Check the token; on success set the session cookie and go on, else show the form again with why."""
    form = await request.form()
    next_path = safe_next(str(form.get("next") or ""))
    nonce = form.get(CSRF_FIELD)
    if not dashboard.codec.login_nonce_matches(
        request.cookies.get(LOGIN_COOKIE_NAME), nonce if isinstance(nonce, str) else None
    ):
        return _login_page(
            request, dashboard, next_path=next_path, status=403,
            error="The sign-in form expired. Please try again.",
        )
    address = request.client.host if request.client is not None else "unknown"
    wait = dashboard.login_limiter.wait_seconds(address)
    if wait:
        refused = _login_page(
            request, dashboard, next_path=next_path, status=429,
            error=f"Too many failed sign-ins. Try again in {wait} seconds.",
        )
        refused.headers["Retry-After"] = str(wait)
        return refused
    token = form.get("token")
    token_text = token.strip() if isinstance(token, str) else ""
    found = (
        dashboard.context.jobs.users.authenticate_token(token_text) if 0 < len(token_text) <= MAX_TOKEN_LENGTH else None
    )
    if found is None:
        dashboard.login_limiter.failed(address)
        return _login_page(
            request, dashboard, next_path=next_path, status=401,
            error="That token is not valid. Check it and try again.",
        )
    user, api_token = found
    secret = dashboard.context.jobs.sessions.open(user, api_token, SESSION_SECONDS)
    _, cookie = dashboard.codec.new_session(secret)
    response = RedirectResponse(next_path, status_code=303)
    set_cookie(response, request, COOKIE_NAME, cookie, SESSION_SECONDS)
    response.delete_cookie(LOGIN_COOKIE_NAME, path="/")
    return response


@router.post("/logout")
def logout(request: Request, dashboard: DashboardDep, _form: CheckedForm) -> Response:
    """End the session on the server, then forget its cookie: a copy of the cookie no longer signs in."""
    session = dashboard.codec.read_session(request.cookies.get(COOKIE_NAME))
    if session is not None:
        dashboard.context.jobs.sessions.end(session.secret)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="lax")
    return response
