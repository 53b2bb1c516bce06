"""Who is calling: bearer tokens (and any authenticator a front end plugs in), and roles.

Tokens are looked up by their SHA-256 in the job store; the clear token is never
stored or logged. `current_user` tries each authenticator of the app in order,
so the dashboard can add its session cookie without touching these routes.
Roles: `user` sees only their own objects; `admin` sees every user's and may
create users.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from tunedeck.api.context import ApiContext, get_context

ROLE_ADMIN = "admin"
ROLE_USER = "user"


@dataclass(frozen=True)
class Principal:
    """The signed-in user, detached from any database session (an `Actor` for the repositories)."""

    id: str
    name: str
    role: str
    locale: str | None = None  # the dashboard language the user chose; None: the browser's

    @property
    def is_admin(self) -> bool:
        """Whether the user sees every user's objects and may manage users."""
        return self.role == ROLE_ADMIN

    @classmethod
    def of(cls, user: Any) -> Principal:
        """From a `User` row."""
        return cls(id=user.id, name=user.name, role=user.role, locale=user.locale)


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(401, detail, headers={"WWW-Authenticate": "Bearer"})


def bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None when there is no such header."""
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    if not token:
        raise _unauthorized("empty bearer token")
    return token


def bearer_authenticator(request: Request, context: ApiContext) -> Principal | None:
    """Sign in with an API token; a token that matches no user is refused outright (401)."""
    token = bearer_token(request)
    if token is None:
        return None
    user = context.jobs.users.authenticate(token)
    if user is None:
        raise _unauthorized("invalid or revoked API token")
    return Principal.of(user)


def current_user(request: Request, context: Annotated[ApiContext, Depends(get_context)]) -> Principal:
    """Dependency: the signed-in user, or 401."""
    for authenticator in context.authenticators:
        principal = authenticator(request, context)
        if principal is not None:
            return principal
    raise _unauthorized("authentication required: send Authorization: Bearer <token>")


def still_signed_in(request: Request, context: ApiContext, principal: Principal) -> bool:
    """Whether the request's credential still signs `principal` in: an open stream asks this as it goes on."""
    try:
        again = next(
            (found for found in (auth(request, context) for auth in context.authenticators) if found is not None), None
        )
    except HTTPException:  # a revoked token, an ended session
        return False
    return again is not None and again.id == principal.id


def credential_check(request: Request, context: ApiContext, principal: Principal) -> Callable[[], Awaitable[bool]]:
    """`still_signed_in` for this request, to be awaited by a stream (the store is read off the event loop)."""

    async def check() -> bool:
        return await run_in_threadpool(still_signed_in, request, context, principal)

    return check


def require_admin(user: Annotated[Principal, Depends(current_user)]) -> Principal:
    """Dependency: the signed-in user when an admin, else 403 (roles are not secret)."""
    if not user.is_admin:
        raise HTTPException(403, "admin role required")
    return user


CurrentUser = Annotated[Principal, Depends(current_user)]
AdminUser = Annotated[Principal, Depends(require_admin)]
