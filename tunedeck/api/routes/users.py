"""The signed-in user and their tokens (list, create, revoke); users created, disabled and given roles by admins."""

from __future__ import annotations

from fastapi import APIRouter, Query, Response, status
from fastapi.responses import JSONResponse

from tunedeck.api.auth import ROLE_ADMIN, AdminUser, CurrentUser
from tunedeck.api.context import Context
from tunedeck.api.routes.deletions import DELETE_RESPONSES, deletion_accepted
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.users import TokenInfoOut, TokenOut, UserCreate, UserDetailOut, UserOut, UserUpdate
from tunedeck.core.errors import StateTransitionError
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.store.models import User
from tunedeck.store.users import TOKEN_NAME_MAX, TOKEN_NAME_PATTERN

router = APIRouter(tags=["users"])


@router.get("/me", response_model=UserOut)
def me(user: CurrentUser) -> UserOut:
    """Who the token belongs to."""
    return UserOut(id=user.id, name=user.name, role=user.role)


@router.post("/me/tokens", response_model=TokenOut, status_code=status.HTTP_201_CREATED)
def new_token(
    user: CurrentUser,
    context: Context,
    name: str = Query(
        "api",
        min_length=1,
        max_length=TOKEN_NAME_MAX,
        pattern=TOKEN_NAME_PATTERN,
        description="A name to tell the token apart (no line break or other control character).",
    ),
) -> TokenOut:
    """A new API token for the signed-in user; shown in this response only."""
    plain, _ = context.jobs.users.issue_token(context.jobs.users.get_user(user.id), name)
    return TokenOut(user=UserOut(id=user.id, name=user.name, role=user.role), token=plain)


@router.get("/me/tokens", response_model=list[TokenInfoOut])
def list_tokens(user: CurrentUser, context: Context) -> list[TokenInfoOut]:
    """The signed-in user's tokens: names, when made and last used (never the secrets)."""
    rows = context.jobs.users.list_tokens(context.jobs.users.get_user(user.id))
    return [TokenInfoOut(id=t.id, name=t.name, created_at=t.created_at, last_used_at=t.last_used_at) for t in rows]


@router.delete(
    "/me/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT, responses={404: {"model": ErrorOut}}
)
def revoke_token(token_id: str, user: CurrentUser, context: Context) -> Response:
    """Revoke one of the signed-in user's tokens: it stops working at once, with the sessions opened with it."""
    context.jobs.users.revoke_token(context.jobs.users.get_user(user.id), token_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def user_detail(user: User) -> UserDetailOut:
    """The admin's view of a user row."""
    return UserDetailOut(
        id=user.id, name=user.name, role=user.role, disabled=user.disabled_at is not None, disabled_at=user.disabled_at
    )


@router.get("/users", response_model=list[UserDetailOut])
def list_users(admin: AdminUser, context: Context) -> list[UserDetailOut]:
    """Every user (admins only)."""
    return [user_detail(u) for u in context.jobs.users.list_users()]


@router.patch(
    "/users/{name}",
    response_model=UserDetailOut,
    responses={403: {"model": ErrorOut}, 404: {"model": ErrorOut}, 409: {"model": ErrorOut}},
)
def update_user(name: str, body: UserUpdate, admin: AdminUser, context: Context) -> UserDetailOut:
    """Disable or enable a user, or change their role (admins only); disabling ends their tokens and sessions."""
    users = context.jobs.users
    target = users.get_user_by_name(name)
    if target.id == admin.id and (body.disabled or (body.role is not None and body.role != ROLE_ADMIN)):
        raise StateTransitionError("an admin cannot disable or demote themselves; ask another admin")
    if body.role is not None:
        target = users.set_role(name, body.role)
    if body.disabled is not None:
        target = users.set_disabled(name, body.disabled)
    return user_detail(target)


@router.delete("/users/{name}", status_code=status.HTTP_202_ACCEPTED, response_model=None, responses=DELETE_RESPONSES)
def delete_user(name: str, admin: AdminUser, context: Context) -> JSONResponse:
    """Delete a user and everything theirs (admins only; not oneself): rows at once, then every copy.

    The receipt is the admin's. A user with a running job is refused: cancel it first.
    """
    target = context.jobs.users.get_user_by_name(name)
    return deletion_accepted(request_deletion(context.jobs, admin, "user", target.id))


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
