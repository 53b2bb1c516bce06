"""The signed-in user and token issuance."""

from __future__ import annotations

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
