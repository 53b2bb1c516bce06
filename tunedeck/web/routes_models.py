"""Base models page: what is registered, and a form that registers a hub id or a local folder through the API."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from tunedeck.api.base_model_facts import base_model_facts
from tunedeck.core.model_facts import format_bytes, format_parameters
from tunedeck.web.page_deps import DashboardDep, SessionDep

router = APIRouter(include_in_schema=False)


@router.get("/models")
def models_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The user's base models with what their files say (read without loading them), and the registration form."""
    roots = dashboard.context.settings.resolved_model_roots()
    models = dashboard.context.jobs.base_models.list(session.user)
    rows = []
    for model in models:
        facts, summary = base_model_facts(model, roots)
        rows.append({"model": model, "facts": facts, "summary": summary})
    return dashboard.renderer.page(
        request,
        "models.html",
        title="Base models",
        nav="models",
        user=session.user,
        csrf_token=session.csrf,
        models=rows,
        format_bytes=format_bytes,
        format_parameters=format_parameters,
        model_roots=dashboard.context.settings.resolved_model_roots(),
    )
