"""`create_openai_app(context)`: the OpenAI-compatible API, mounted at `/v1` by the main app.

A sub-application, so that every error under `/v1` (including the framework's own: a
bad body, an unknown path) is written in the OpenAI shape, and its OpenAPI document
(`/v1/openapi.json`) describes only these routes.
"""

from __future__ import annotations

from fastapi import FastAPI

import tunedeck
from tunedeck.api.context import ApiContext
from tunedeck.api.errors import install_error_handlers
from tunedeck.api.openai.errors import render_openai_error
from tunedeck.api.openai.routes import chat, files, fine_tuning, models

OPENAI_PREFIX = "/v1"


def create_openai_app(context: ApiContext) -> FastAPI:
    """The `/v1` sub-application, sharing `context` (database, storage, settings) with the main app."""
    app = FastAPI(
        title="tunedeck OpenAI-compatible API",
        version=tunedeck.__version__,
        description="Files, fine-tuning jobs, models and chat completions in the OpenAI client's shapes.",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.tunedeck = context
    install_error_handlers(app, render_openai_error)
    for module in (files, fine_tuning, models, chat):
        app.include_router(module.router)
    return app
