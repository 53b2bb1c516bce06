"""Training config: JSON Schema, recipes, and a dry-run validation for forms and clients."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query

from tunedeck.api.auth import current_user
from tunedeck.api.schemas.common import ErrorOut
from tunedeck.api.schemas.config import ConfigCheckOut, ConfigKeys, RecipeOut
from tunedeck.config.loading import check_config, config_schema
from tunedeck.config.recipes import get_recipe, list_recipes

router = APIRouter(prefix="/config", tags=["config"], dependencies=[Depends(current_user)])


@router.get("/schema")
def get_schema() -> dict[str, Any]:
    """The JSON Schema of the training config (the dashboard builds its form from it)."""
    return config_schema()


@router.get("/recipes", response_model=list[RecipeOut])
def get_recipes() -> list[RecipeOut]:
    """Every shipped recipe."""
    return [RecipeOut(name=r.name, title=r.title, values=r.values) for r in list_recipes()]


@router.get("/recipes/{name}", response_model=RecipeOut, responses={404: {"model": ErrorOut}})
def get_one_recipe(name: str) -> RecipeOut:
    """One recipe by name."""
    if name not in {recipe.name for recipe in list_recipes()}:
        raise HTTPException(404, f'no recipe named "{name}"')
    recipe = get_recipe(name)
    return RecipeOut(name=recipe.name, title=recipe.title, values=recipe.values)


@router.post("/validate", response_model=ConfigCheckOut, responses={422: {"model": ErrorOut}})
def validate(
    config: Annotated[ConfigKeys, Body(description="A training config object.")],
    examples: Annotated[
        int | None, Query(ge=1, description="Training rows: the warnings then cover the step count and warmup.")
    ] = None,
) -> ConfigCheckOut:
    """Validate a config without creating a job: 422 with every issue by field, else the resolved config.

    `warnings` lists choices that run but probably not as meant (each names its field).
    """
    check = check_config(config, train_examples=examples)
    return ConfigCheckOut(config=check.config.to_json_dict(), warnings=[w.to_dict() for w in check.warnings])
