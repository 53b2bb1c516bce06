"""Health and version: unauthenticated, and revealing nothing about users or data."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Response
from sqlalchemy import text

import tunedeck
from tunedeck.api.context import Context
from tunedeck.api.schemas.system import HealthOut, VersionOut
from tunedeck.service.privacy.key_checks import MISMATCH, key_check_states
from tunedeck.storage.encryption import Keyring

API_VERSION = "v1"
router = APIRouter(tags=["system"])
logger = logging.getLogger(__name__)


@router.get("/health", response_model=HealthOut, responses={503: {"model": HealthOut}})
def health(context: Context, response: Response) -> HealthOut:
    """Whether the database and the artifact store answer; 503 when one does not.

    The storage is also unavailable while an encryption key does not match the check value
    recorded for its id (it could neither read what that key sealed nor seal for the right key).
    """
    database = storage = "ok"
    try:
        with context.jobs.db.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as error:  # any driver error means "not ready"; the reason goes to the log only
        logger.warning("health: database check failed: %s", type(error).__name__)
        database = "unavailable"
    try:
        context.artifacts.exists("health-probe")
        if MISMATCH in key_check_states(context.jobs, Keyring.from_settings(context.settings)).values():
            logger.warning("health: an encryption key does not match its recorded check value")
            storage = "unavailable"
    except Exception as error:
        logger.warning("health: storage check failed: %s", type(error).__name__)
        storage = "unavailable"
    ok = database == "ok" and storage == "ok"
    if not ok:
        response.status_code = 503
    return HealthOut(status="ok" if ok else "degraded", database=database, storage=storage)


@router.get("/version", response_model=VersionOut)
def version() -> VersionOut:
    """The running tunedeck version and API version."""
    return VersionOut(name="tunedeck", version=tunedeck.__version__, api=API_VERSION)
