"""Base models page: what is registered, and a form that registers a hub id or a local folder through the API."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from tunedeck.core.model_facts import format_bytes, format_parameters
from tunedeck.service.models.base_model_facts import NOT_FETCHED, NOT_READABLE, base_model_facts
from tunedeck.web.locales.catalogue import marked
from tunedeck.web.page_deps import DashboardDep, SessionDep

router = APIRouter(include_in_schema=False)

# Why a model's facts are not shown, in the page's words (the API's summary keeps the English).
WHY_UNKNOWN = {
    NOT_FETCHED: marked("not known yet: a worker has not fetched this hub model on this server"),
    NOT_READABLE: marked("not known: the registered folder cannot be read"),
}


@router.get("/models")
def models_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The user's base models with what their files say (read without loading them), and the registration form."""
    roots = dashboard.context.settings.resolved_model_roots()
    models = dashboard.context.jobs.base_models.list(session.user)
    rows = []
    for model in models:
        facts, summary = base_model_facts(model, roots)
        rows.append({"model": model, "facts": facts, "unknown": WHY_UNKNOWN.get(summary, summary)})
    return dashboard.renderer.page(
        request,
        "models.html",
        title=marked("Base models"),
        nav="models",
        user=session.user,
        csrf_token=session.csrf,
        models=rows,
        format_bytes=format_bytes,
        format_parameters=format_parameters,
        model_roots=dashboard.context.settings.resolved_model_roots(),
    )
