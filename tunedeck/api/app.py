"""`create_app(settings)`: the FastAPI application, built on demand (nothing at import time)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

import tunedeck
from tunedeck.api.auth import bearer_authenticator
from tunedeck.api.context import ApiContext
from tunedeck.api.docs_page import install_docs
from tunedeck.api.errors import install_error_handlers
from tunedeck.api.input_guards import NulRefusingMiddleware
from tunedeck.api.json_guards import JsonBodyGuardMiddleware
from tunedeck.api.openai.app import OPENAI_PREFIX, create_openai_app
from tunedeck.api.openapi_rules import document_shared_rules
from tunedeck.api.response_headers import NoSniffMiddleware
from tunedeck.api.routes import (
    access_log,
    base_models,
    checkpoints,
    config,
    dataset_inspection,
    datasets,
    deletions,
    events,
    experiments,
    job_log,
    job_reports,
    jobs,
    metrics,
    plans,
    preflight,
    quotas,
    retention,
    system,
    test_sets,
    users,
    work,
)
from tunedeck.api.routes import exports as export_routes
from tunedeck.api.upload_sweeps import UploadSweeper
from tunedeck.core.settings import Settings
from tunedeck.service.privacy.key_checks import verify_encryption_keys
from tunedeck.storage.base import ArtifactStore
from tunedeck.storage.encryption import Keyring
from tunedeck.storage.factory import open_store_from_settings
from tunedeck.store.db import Database
from tunedeck.store.store import JobStore
from tunedeck.web.app import STATIC_PATH, mount_dashboard

API_PREFIX = "/api/v1"


def create_app(
    settings: Settings, *, store: ArtifactStore | None = None, job_store: JobStore | None = None
) -> FastAPI:
    """The API app for `settings`.

    `store` overrides the artifact store named by `settings.storage_url`, and
    `job_store` the database connection (its schema must already be migrated:
    `tunedeck serve` migrates on start). A job store made here is closed when
    the app shuts down. Front ends extend sign-in with
    `app.state.tunedeck.add_authenticator(...)`.
    """
    owned = job_store is None
    artifacts = store or open_store_from_settings(settings)  # first: a bad key file fails before a connection opens
    jobs_store = job_store or JobStore(
        Database.connect(settings.resolved_database_url()), default_max_attempts=settings.max_attempts
    )
    try:
        # A key whose secret is not the one its id sealed with refuses the start, before it seals anything.
        verify_encryption_keys(jobs_store, Keyring.from_settings(settings))
    except BaseException:
        if owned:
            jobs_store.close()
        raise
    context = ApiContext(
        settings=settings,
        jobs=jobs_store,
        artifacts=artifacts,
        authenticators=[bearer_authenticator],
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # Uploads a killed server left behind: swept at start and periodically while the app serves.
        sweeper = UploadSweeper(context.uploads_dir, settings.sweep_interval_s).start()
        try:
            yield
        finally:
            sweeper.stop()
            if owned:
                jobs_store.close()

    app = FastAPI(
        title="tunedeck",
        version=tunedeck.__version__,
        description="Fine-tune language models: datasets, base models, training jobs, metrics, checkpoints.",
        docs_url=None,  # served by `install_docs`, from this package's files
        redoc_url=None,
        openapi_url="/openapi.json",
        lifespan=lifespan,
    )
    app.state.tunedeck = context
    install_error_handlers(app)
    app.add_middleware(NulRefusingMiddleware)
    app.add_middleware(NoSniffMiddleware)
    app.add_middleware(JsonBodyGuardMiddleware, openai_prefix=OPENAI_PREFIX)
    api = APIRouter(prefix=API_PREFIX)
    routers = (system, users, config, datasets, dataset_inspection, base_models, jobs, metrics, events, checkpoints)
    more = (test_sets, job_reports, experiments, plans, preflight, quotas, retention, work, access_log, deletions)
    for module in (*routers, *more, job_log):
        api.include_router(module.router)
    api.include_router(datasets.hub_router)  # hub dataset registration
    api.include_router(export_routes.router)  # generation playground and exports
    app.include_router(api)
    app.mount(OPENAI_PREFIX, create_openai_app(context))  # the OpenAI client's shapes, same rules
    document_shared_rules(app)
    mount_dashboard(app, context)
    install_docs(app, STATIC_PATH)
    return app
