"""Base models page: what is registered, and a form that registers a hub id or a local folder through the API."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from tunedeck.web.page_deps import DashboardDep, SessionDep

router = APIRouter(include_in_schema=False)


@router.get("/models")
def models_page(request: Request, session: SessionDep, dashboard: DashboardDep) -> Response:
    """The user's base models and the registration form."""
    return dashboard.renderer.page(
        request,
        "models.html",
        title="Base models",
        nav="models",
        user=session.user,
        csrf_token=session.csrf,
        models=dashboard.context.jobs.base_models.list(session.user),
        model_roots=dashboard.context.settings.resolved_model_roots(),
    )
