"""Recording a read of a user's raw data from a request: who (the signed-in user), how, and from where."""

from __future__ import annotations

from fastapi import Request

from tunedeck.api.auth import Principal
from tunedeck.api.context import ApiContext
from tunedeck.store.access_log import DataRead, Reader


def request_via(request: Request) -> str:
    """`api` for a request signed with an API token, `web` for the dashboard's (its session cookie)."""
    return "api" if request.headers.get("authorization") else "web"


def client_address(request: Request) -> str | None:
    """The peer address of the request, when the server knows it."""
    return request.client.host if request.client is not None else None


def record_read(
    context: ApiContext,
    request: Request,
    user: Principal,
    *,
    owner_id: str,
    object_kind: str,
    object_id: str,
    object_label: str,
    action: str,
) -> None:
    """Log in `owner_id`'s access log that `user` read the object (an admin reading another's object included)."""
    read = DataRead(
        owner_id=owner_id,
        object_kind=object_kind,
        object_id=object_id,
        object_label=object_label,
        action=action,
        via=request_via(request),
        client_address=client_address(request),
    )
    context.jobs.access_log.record(Reader(user.id, user.name), read)
