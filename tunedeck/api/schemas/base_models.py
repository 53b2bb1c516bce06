"""Base-model registration: a hub id with a revision, or a local folder with weights."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from tunedeck.api.schemas.common import RequestBody

# owner/name as the hub spells it; no scheme, no `..`.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")


# What `_one_source` checks, as the OpenAPI document states it: a hub id (and a revision) or a local path.
_ONE_SOURCE: JsonDict = {
    "oneOf": [
        {"required": ["hub_id"], "properties": {"hub_id": {"type": "string"}, "local_path": {"type": "null"}}},
        {
            "required": ["local_path"],
            "properties": {"local_path": {"type": "string"}, "hub_id": {"type": "null"}, "revision": {"type": "null"}},
        },
    ]
}
_NO_DOUBLE_DOT: JsonDict = {"not": {"type": "string", "pattern": r"\.\."}}


class BaseModelCreate(RequestBody):
    """Either `hub_id` (with an optional `revision`, default "main") or `local_path`, not both."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_ONE_SOURCE)

    name: str | None = Field(None, min_length=1, max_length=200, description="Display name.")
    hub_id: str | None = Field(
        None,
        max_length=200,
        description='Hub repository id, e.g. "org/model".',
        json_schema_extra={"pattern": HUB_ID.pattern, **_NO_DOUBLE_DOT},
    )
    revision: str | None = Field(
        None,
        max_length=200,
        description="Branch, tag or commit (default main); the worker pins the commit.",
        json_schema_extra={"pattern": REVISION.pattern, **_NO_DOUBLE_DOT},
    )
    local_path: str | None = Field(
        None,
        max_length=1000,
        description="Absolute folder on the server with config.json and *.safetensors, inside the model roots.",
        json_schema_extra={"pattern": "^/"},
    )

    @model_validator(mode="after")
    def _one_source(self) -> BaseModelCreate:
        if (self.hub_id is None) == (self.local_path is None):
            raise ValueError("give exactly one of hub_id and local_path")
        if self.hub_id is not None and (not HUB_ID.match(self.hub_id) or ".." in self.hub_id):
            raise ValueError(f'hub_id "{self.hub_id}" is not a hub repository id like "org/model"')
        if self.revision is not None:
            if self.local_path is not None:
                raise ValueError("revision applies to hub_id only")
            if not REVISION.match(self.revision) or ".." in self.revision:
                raise ValueError(f'revision "{self.revision}" is not a branch, tag or commit')
        return self


class BaseModelOut(BaseModel):
    """A registered base model, recorded as given; the worker resolves and pins it."""

    id: str
    name: str
    source: Literal["hub", "local"]
    hub_id: str | None = None
    revision: str | None = None
    local_path: str | None = None
    resolved: str | None = Field(None, description="Commit or content fingerprint pinned at first load.")
    created_at: datetime
    remote_code_allowed: bool = Field(
        False, description="An admin allowed the model's own code to run for jobs with trust_remote_code."
    )
    remote_code_allowed_at: datetime | None = None


class RemoteCodeIn(RequestBody):
    """An admin's decision on running a base model's own code (its config's auto_map)."""

    model_config = ConfigDict(extra="forbid")

    allowed: bool = Field(description="True allows jobs with trust_remote_code on this model; False withdraws it.")


class BaseModelFactsOut(BaseModel):
    """What a base model's files say about it, read without loading it; a null fact is not known."""

    id: str
    known: bool = Field(description="False until the model's files can be read on this server.")
    summary: str = Field(description="The facts in one line, or why they are not known.")
    parameters: int | None = Field(None, description="Values in the safetensors tensors.")
    size_bytes: int | None = Field(None, description="Bytes of the model's files on disk.")
    architecture: str | None = Field(None, description="config.json `architectures[0]`.")
    model_type: str | None = Field(None, description="config.json `model_type`.")
    licence: str | None = Field(None, description="The licence its model card, config or licence file names.")
    chat_template: bool | None = Field(None, description="Whether its tokenizer carries a chat template.")
