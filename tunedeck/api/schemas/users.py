"""Users, their roles and state, and their API tokens (secrets shown once, never listed)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tunedeck.api.auth import ROLE_ADMIN, ROLE_USER
from tunedeck.api.schemas.common import RequestBody


class UserOut(BaseModel):
    """A user, without any secret."""

    id: str
    name: str
    role: str


class UserCreate(RequestBody):
    """A new user (admins only)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(..., min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    role: str = Field(ROLE_USER, pattern=f"^({ROLE_ADMIN}|{ROLE_USER})$")


class TokenOut(BaseModel):
    """A new API token: shown in this response only, stored as a SHA-256 hash."""

    user: UserOut
    token: str


class UserDetailOut(UserOut):
    """A user as an admin sees them: with whether they are disabled."""

    disabled: bool = False
    disabled_at: datetime | None = None


class UserUpdate(RequestBody):
    """An admin's change to a user: disable (ends their tokens' use and their sessions at once) or change role."""

    model_config = ConfigDict(extra="forbid")

    disabled: bool | None = Field(None, description="True: every token and session of the user stops working.")
    role: str | None = Field(None, pattern=f"^({ROLE_ADMIN}|{ROLE_USER})$")


class TokenInfoOut(BaseModel):
    """One of the signed-in user's API tokens: its name and use, never the secret."""

    id: str
    name: str
    created_at: datetime
    last_used_at: datetime | None = None
