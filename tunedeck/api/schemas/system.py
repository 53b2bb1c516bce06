"""Health and version responses."""

from __future__ import annotations

from pydantic import BaseModel


class HealthOut(BaseModel):
    """Liveness and readiness of the service's dependencies."""

    status: str  # "ok" when every check passed, else "degraded"
    database: str
    storage: str


class VersionOut(BaseModel):
    """What is running."""

    name: str
    version: str
    api: str
