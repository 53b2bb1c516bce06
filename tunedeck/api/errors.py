"""Map tunedeck errors to HTTP responses so bad input never becomes a 500.

Issue lists (config and data errors) become 422 with every located issue, so a
client can point at the exact line or field to fix.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tunedeck.api.engine_slots import EngineSlotsFull
from tunedeck.api.schemas.common import ErrorOut, IssueOut
from tunedeck.core.errors import (
    ForbiddenError,
    IssueListError,
    NotFoundError,
    StateTransitionError,
    StorageError,
)
from tunedeck.jobs.errors import AlreadyExistsError
from tunedeck.storage.base import MissingArtifactError

logger = logging.getLogger(__name__)


def error_response(status: int, detail: str, issues: list[IssueOut] | None = None) -> JSONResponse:
    """A JSON error body in the shape of ErrorOut."""
    body = ErrorOut(detail=detail, issues=issues or [])
    return JSONResponse(status_code=status, content=body.model_dump(exclude_none=True))


async def _issue_list(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, IssueListError)
    return error_response(422, error.title, [IssueOut.from_issue(issue) for issue in error.issues])


async def _not_found(request: Request, error: Exception) -> JSONResponse:
    return error_response(404, str(error) or "not found")


async def _forbidden(request: Request, error: Exception) -> JSONResponse:
    return error_response(403, str(error))


async def _conflict(request: Request, error: Exception) -> JSONResponse:
    return error_response(409, str(error))


async def _storage(request: Request, error: Exception) -> JSONResponse:
    # A storage failure is ours, not the client's; say so without leaking keys or credentials.
    logger.warning(
        "artifact storage error on %s %s: %s", request.method, request.url.path, type(error).__name__
    )
    return error_response(503, "artifact storage is unavailable or an artifact failed verification")


async def _busy(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, EngineSlotsFull)
    response = error_response(429, error.detail)
    response.headers["Retry-After"] = str(error.retry_after_s)
    return response


def install_error_handlers(app: FastAPI) -> None:
    """Register the tunedeck error → HTTP status mapping on `app`."""
    # ConfigError and DataError are IssueListErrors.
    app.add_exception_handler(IssueListError, _issue_list)
    app.add_exception_handler(NotFoundError, _not_found)
    app.add_exception_handler(ForbiddenError, _forbidden)
    app.add_exception_handler(EngineSlotsFull, _busy)
    app.add_exception_handler(StateTransitionError, _conflict)
    app.add_exception_handler(AlreadyExistsError, _conflict)
    app.add_exception_handler(StorageError, _storage)
    # Both a StorageError and a NotFoundError: the client asked for something that is not there.
    app.add_exception_handler(MissingArtifactError, _not_found)
