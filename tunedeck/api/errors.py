"""Map tunedeck errors to HTTP responses so bad input never becomes a 500.

Issue lists (config and data errors) become 422 with every located issue, so a
client can point at the exact line or field to fix. Requests the framework refuses
before a route runs (invalid parameters or body, a method the path does not have)
answer in the same ErrorOut shape.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from tunedeck.api.schemas.common import ErrorOut, IssueOut
from tunedeck.core.errors import (
    ForbiddenError,
    IssueListError,
    MissingReferenceError,
    NotFoundError,
    StateTransitionError,
    StorageError,
)
from tunedeck.service.exports.work_limits import WorkQueueFull
from tunedeck.service.privacy.deletion_plan import TrainedModelsError
from tunedeck.storage.base import MissingArtifactError
from tunedeck.store.errors import AlreadyExistsError

logger = logging.getLogger(__name__)
# How much of a refused value an issue repeats back: enough to recognise it, never a whole upload.
FOUND_CHARS = 100
# The request parts FastAPI names first in an error location; body fields are named relative to the body.
_PARAMETER_PARTS = frozenset({"path", "query", "header", "cookie"})


def error_response(status: int, detail: str, issues: list[IssueOut] | None = None) -> JSONResponse:
    """A JSON error body in the shape of ErrorOut."""
    body = ErrorOut(detail=detail, issues=issues or [])
    return JSONResponse(status_code=status, content=body.model_dump(exclude_none=True))


@dataclass(frozen=True)
class ErrorAnswer:
    """What an error answers, before it is written in one API's error shape."""

    status: int
    detail: str
    issues: list[IssueOut] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


# Writes an ErrorAnswer as a response: tunedeck's ErrorOut here, the OpenAI error object under /v1.
ErrorRenderer = Callable[[ErrorAnswer], Response]


def render_error_out(answer: ErrorAnswer) -> Response:
    """An ErrorAnswer in tunedeck's own ErrorOut shape."""
    response = error_response(answer.status, answer.detail, answer.issues)
    response.headers.update(answer.headers)
    return response


def _issue_list(request: Request, error: Exception) -> ErrorAnswer:
    assert isinstance(error, IssueListError)
    return ErrorAnswer(422, error.title, [IssueOut.from_issue(issue) for issue in error.issues])


def _missing_reference(request: Request, error: Exception) -> ErrorAnswer:
    assert isinstance(error, MissingReferenceError)
    return ErrorAnswer(404, error.title, [IssueOut.from_issue(issue) for issue in error.issues])


def _not_found(request: Request, error: Exception) -> ErrorAnswer:
    return ErrorAnswer(404, str(error) or "not found")


def _forbidden(request: Request, error: Exception) -> ErrorAnswer:
    return ErrorAnswer(403, str(error))


def _conflict(request: Request, error: Exception) -> ErrorAnswer:
    return ErrorAnswer(409, str(error))


def _trained_models(request: Request, error: Exception) -> ErrorAnswer:
    # Each job the data trained, as an issue, so a client can list them before asking again.
    assert isinstance(error, TrainedModelsError)
    issues = [
        IssueOut(message=f"job {name!r} {error.relation}", field="with_models", found=job_id,
                 expected="true, to delete this job with it")
        for job_id, name in error.jobs
    ]  # fmt: skip
    return ErrorAnswer(409, str(error), issues)


def _storage(request: Request, error: Exception) -> ErrorAnswer:
    # A storage failure is ours, not the client's; say so without leaking keys or credentials.
    logger.warning(
        "artifact storage error on %s %s: %s", request.method, request.url.path, type(error).__name__
    )
    return ErrorAnswer(503, "artifact storage is unavailable or an artifact failed verification")


def _field_name(location: Sequence[Any]) -> str | None:
    """`config.lora_r`, `guards[1]` (body fields, as the routes' own issues name them) or a parameter's name."""
    parts = list(location)
    if parts and parts[0] == "body":
        parts = parts[1:] or ["body"]
    elif parts and parts[0] in _PARAMETER_PARTS:
        parts = parts[1:]
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or None


def _issue(item: dict[str, Any]) -> IssueOut:
    """One framework validation error as a located issue."""
    if item.get("type") == "json_invalid":  # its location is a character of the text, not a field
        position = list(item.get("loc", ()))[1:]
        where = f" (at character {position[0]})" if position else ""
        return IssueOut(message=f"the body is not valid JSON{where}", field="body")
    return IssueOut(
        message=str(item.get("msg", "invalid")),
        field=_field_name(item.get("loc", ())),
        found=None if item.get("type") == "missing" else str(item.get("input"))[:FOUND_CHARS],
    )


def _request_invalid(request: Request, error: Exception) -> ErrorAnswer:
    assert isinstance(error, RequestValidationError)
    return ErrorAnswer(422, "invalid request", [_issue(item) for item in error.errors()])


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers on this request's path (routes split one path by method)."""
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.routes):
        if route.methods and route.matches(request.scope)[0] is not Match.NONE:
            methods |= set(route.methods)
    return sorted(methods)


def _http_error(request: Request, error: Exception) -> ErrorAnswer:
    assert isinstance(error, StarletteHTTPException)
    if error.status_code == 405:
        # The router names only the methods of the first route that matched the path.
        return ErrorAnswer(405, "method not allowed", headers={"Allow": ", ".join(allowed_methods(request))})
    return ErrorAnswer(error.status_code, str(error.detail), headers=dict(error.headers or {}))


def _busy(request: Request, error: Exception) -> ErrorAnswer:
    assert isinstance(error, WorkQueueFull)
    return ErrorAnswer(429, error.detail, headers={"Retry-After": str(error.retry_after_s)})


# Which answer each error gets; a subclass listed after its base overrides it (a MissingArtifactError is
# both a StorageError and a NotFoundError: the client asked for something that is not there).
_ANSWERS: tuple[tuple[type[Exception], Callable[[Request, Exception], ErrorAnswer]], ...] = (
    (RequestValidationError, _request_invalid),
    (StarletteHTTPException, _http_error),
    (IssueListError, _issue_list),  # ConfigError and DataError are IssueListErrors
    (MissingReferenceError, _missing_reference),
    (NotFoundError, _not_found),
    (ForbiddenError, _forbidden),
    (WorkQueueFull, _busy),
    (StateTransitionError, _conflict),
    (AlreadyExistsError, _conflict),
    (TrainedModelsError, _trained_models),
    (StorageError, _storage),
    (MissingArtifactError, _not_found),
)


def install_error_handlers(app: FastAPI, render: ErrorRenderer = render_error_out) -> None:
    """Register the tunedeck error → HTTP status mapping on `app`, each answer written by `render`."""
    for error_type, answer in _ANSWERS:

        async def handle(
            request: Request, error: Exception, answer: Callable[[Request, Exception], ErrorAnswer] = answer
        ) -> Response:
            return render(answer(request, error))

        app.add_exception_handler(error_type, handle)
