"""Training-config schema and recipe responses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class RecipeOut(BaseModel):
    """A shipped config, verbatim as the job config contract gives it."""

    name: str
    title: str
    values: dict[str, Any]


class ConfigCheckOut(BaseModel):
    """A config that passed validation, with every key resolved, and the warnings about it."""

    config: dict[str, Any]
    warnings: list[dict[str, Any]] = []
