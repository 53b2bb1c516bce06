"""Errors under `/v1` in the OpenAI error shape: `{"error": {"message", "type", "param", "code"}}`.

The same tunedeck errors map to the same situations as on `/api/v1`; only the body and
a few status codes differ: the client's API answers a request it cannot accept with 400
where tunedeck's own answers 422.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse, Response

from tunedeck.api.errors import ErrorAnswer
from tunedeck.api.schemas.common import IssueOut

# The client's error `type` for each status it documents; any other 5xx is a server_error.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}
# A 422 here is a request the client's API refuses with 400.
_STATUS = {422: 400}


def openai_error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> JSONResponse:
    """An OpenAI-shaped error response."""
    status = _STATUS.get(status, status)
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(status_code=status, content=body)


def _described(issue: IssueOut) -> str:
    """One issue in words: `file line N: field: message (expected X, found Y)`, each part where known."""
    where = " ".join(part for part in (issue.file, f"line {issue.line}" if issue.line is not None else None) if part)
    details = ", ".join(
        text
        for text in (
            f"expected {issue.expected}" if issue.expected else None,
            f"found {issue.found}" if issue.found else None,
        )
        if text
    )
    parts = [f"{where}:" if where else "", f"{issue.field}:" if issue.field else "", issue.message]
    return " ".join(part for part in parts if part) + (f" ({details})" if details else "")


def render_openai_error(answer: ErrorAnswer) -> Response:
    """An ErrorAnswer as an OpenAI error: every located issue spelled out in the message (file, line, field,
    expectation), the first one's field as `param`."""
    message = answer.detail
    if answer.issues:
        message = f"{message}: " + "; ".join(_described(issue) for issue in answer.issues)
    first_field = next((issue.field for issue in answer.issues if issue.field), None)
    code = "invalid_api_key" if answer.status == 401 else None
    response = openai_error(answer.status, message, param=first_field, code=code)
    response.headers.update(answer.headers)
    return response
