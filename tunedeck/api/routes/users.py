"""The signed-in user, new tokens for oneself, and user creation by admins."""

from __future__ import annotations

from fastapi import APIRouter, status

from tunedeck.api.auth import ROLE_ADMIN, AdminUser, CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.users import TokenOut, UserCreate, UserOut

router = APIRouter(tags=["users"])


@router.get("/me", response_model=UserOut)
def me(user: CurrentUser) -> UserOut:
    """Who the token belongs to."""
    return UserOut(id=user.id, name=user.name, role=user.role)


@router.post("/me/tokens", response_model=TokenOut, status_code=status.HTTP_201_CREATED)
def new_token(user: CurrentUser, context: Context) -> TokenOut:
    """A new API token for the signed-in user; shown in this response only."""
    plain, _ = context.jobs.users.issue_token(context.jobs.users.get_user(user.id), "api")
    return TokenOut(user=UserOut(id=user.id, name=user.name, role=user.role), token=plain)


@router.get("/users", response_model=list[UserOut])
def list_users(admin: AdminUser, context: Context) -> list[UserOut]:
    """Every user (admins only)."""
    return [UserOut(id=u.id, name=u.name, role=u.role) for u in context.jobs.users.list_users()]


@router.post(
    "/users",
    response_model=TokenOut,
    status_code=status.HTTP_201_CREATED,
    responses={409: {"model": ErrorOut}},
)
def create_user(body: UserCreate, admin: AdminUser, context: Context) -> TokenOut:
    """Create a user and their first token (admins only); the token is shown in this response only."""
    user = context.jobs.users.create_user(body.name, admin=body.role == ROLE_ADMIN)
    plain, _ = context.jobs.users.issue_token(user)
    return TokenOut(user=UserOut(id=user.id, name=user.name, role=user.role), token=plain)
