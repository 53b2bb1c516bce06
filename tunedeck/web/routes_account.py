"""Account page: the user's quotas and their use, API tokens, a new one shown once, and revoking any of them."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from tunedeck.core.dashboard_languages import LANGUAGES
from tunedeck.service.users.storage_quota import storage_meter
from tunedeck.store.users import token_name_problem
from tunedeck.web.locales.catalogue import marked
from tunedeck.web.page_deps import CheckedForm, DashboardDep, SessionDep, page_lookup

router = APIRouter(include_in_schema=False)
LANGUAGE_NOTICES = {
    "saved": marked("The dashboard speaks the language you chose."),
    "unknown": marked("That language is not one the dashboard speaks: nothing changed."),
}


def _account_page(
    request: Request, session: SessionDep, dashboard: DashboardDep, *, new_token: str | None = None,
    notice: str | None = None, error: str | None = None, status: int = 200,
) -> Response:
    users = dashboard.context.jobs.users
    quotas = dashboard.context.jobs.quotas
    return dashboard.renderer.page(
        request,
        "account.html",
        status_code=status,
        title=marked("Account"),
        nav="account",
        user=session.user,
        csrf_token=session.csrf,
        tokens=users.list_tokens(users.get_user(session.user.id)),
        limits=quotas.limits_for(session.user.id),
        use=quotas.usage(session.user.id, meter=storage_meter(dashboard.context)),
        new_token=new_token,
        notice=notice,
        error=error,
    )


@router.get("/account")
def account_page(
    request: Request,
    session: SessionDep,
    dashboard: DashboardDep,
    revoked: str | None = Query(None, max_length=5),
    language: str | None = Query(None, max_length=10),
) -> Response:
    """The user's tokens: names, when made and last used; the secrets are never shown again."""
    notice = LANGUAGE_NOTICES.get(language or "")
    if revoked:
        notice = marked("The token was revoked: it no longer works, nor do sessions signed in with it.")
    return _account_page(request, session, dashboard, notice=notice)


@router.post("/account/tokens")
def create_token(request: Request, session: SessionDep, dashboard: DashboardDep, form: CheckedForm) -> Response:
    """A new token, shown on this page once (never in a URL, never again)."""
    name = str(form.get("name") or "").strip()
    problem = token_name_problem(name)
    if problem is not None:
        return _account_page(request, session, dashboard, status=422, error=f"Give the token another name: {problem}.")
    users = dashboard.context.jobs.users
    plain, _ = users.issue_token(users.get_user(session.user.id), name)
    return _account_page(request, session, dashboard, new_token=plain)


@router.post("/account/tokens/{token_id}/revoke")
def revoke_token(token_id: str, session: SessionDep, dashboard: DashboardDep, _form: CheckedForm) -> Response:
    """Revoke one of the user's tokens (another user's token id is a 404 page)."""
    users = dashboard.context.jobs.users
    with page_lookup():
        users.revoke_token(users.get_user(session.user.id), token_id)
    return RedirectResponse("/account?revoked=1", status_code=303)


@router.post("/account/language")
def choose_language(session: SessionDep, dashboard: DashboardDep, form: CheckedForm) -> Response:
    """The dashboard language of the signed-in user; an empty choice follows their browser's again."""
    chosen = str(form.get("language") or "")
    if chosen and chosen not in LANGUAGES:
        return RedirectResponse("/account?language=unknown", status_code=303)
    dashboard.context.jobs.users.set_locale(session.user.id, chosen or None)
    return RedirectResponse("/account?language=saved", status_code=303)
