"""`mount_dashboard(app, context)`: the server-rendered dashboard, served by the API's own app.

Adds the page routes, the static files (our own CSS and scripts, from this
package), the HTML answers for page errors, and the session-cookie
authenticator so the pages' scripts call the JSON API as the signed-in user.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from tunedeck.api.context import ApiContext
from tunedeck.web import (
    routes_access_log,
    routes_account,
    routes_auth,
    routes_datasets,
    routes_deletions,
    routes_experiments,
    routes_jobs,
    routes_models,
    routes_plans,
    routes_retention,
)
from tunedeck.web.page_deps import Dashboard, install_page_handlers
from tunedeck.web.rendering import Renderer
from tunedeck.web.session import SessionCodec, load_or_create_secret, session_authenticator

STATIC_PATH = "/static"


def mount_dashboard(app: FastAPI, context: ApiContext, *, secret: bytes | None = None) -> Dashboard:
    """Serve the dashboard from `app`; `secret` signs sessions (default: a key kept in the data directory)."""
    codec = SessionCodec(secret if secret is not None else load_or_create_secret(context.settings.data_dir))
    dashboard = Dashboard(context=context, codec=codec, renderer=Renderer())
    app.state.dashboard = dashboard
    context.add_authenticator(session_authenticator(codec))
    app.mount(STATIC_PATH, StaticFiles(packages=[("tunedeck.web", "static")]), name="static")
    pages = (routes_auth, routes_datasets, routes_models, routes_jobs, routes_experiments, routes_account)
    for module in (*pages, routes_plans, routes_access_log, routes_retention, routes_deletions):
        app.include_router(module.router)
    install_page_handlers(app)
    return dashboard
