"""Training-config schema, the config keys requests carry, and recipe responses."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, WithJsonSchema

from tunedeck.api.schemas.common import refuse_nul
from tunedeck.config.training import TrainingConfig

# Config keys in a request body: kept as sent, so the route validates them and names each bad key
# (`config.<key>`), and documented as the keys and values TrainingConfig accepts. Keys that contradict
# each other have no JSON Schema spelling; the messages name them. No text in them may hold NUL,
# even where the body is the config itself (POST /config/validate).
ConfigKeys = Annotated[
    dict[str, Any], AfterValidator(refuse_nul), WithJsonSchema(TrainingConfig.model_json_schema())
]


class RecipeOut(BaseModel):
    """A shipped config, verbatim as the job config contract gives it."""

    name: str
    title: str
    values: dict[str, Any]


class ConfigCheckOut(BaseModel):
    """A config that passed validation, with every key resolved, and the warnings about it."""

    config: dict[str, Any]
    warnings: list[dict[str, Any]] = []
