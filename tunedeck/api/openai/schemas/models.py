"""Wire shapes of `/v1/models`, as the client's `Model` and `ModelDeleted` read them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class ModelOut(BaseModel):
    """A model the caller may name: a base model or a succeeded job's fine-tuned model."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    """Every model of the caller."""

    object: Literal["list"] = "list"
    data: list[ModelOut]


class ModelDeletedOut(BaseModel):
    """The answer to deleting a model."""

    id: str
    object: str = "model"
    deleted: bool = True
