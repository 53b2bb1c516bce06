"""Generation (playground) and export requests and answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from tunedeck.api.schemas.checkpoints import StoredFileOut
from tunedeck.api.schemas.common import SEED_MAX, SQL_INT_MAX, RequestBody

# Tokens one generation may write (the playground's and /v1/chat/completions' bound), and by default.
MAX_NEW_TOKENS = 1024
DEFAULT_NEW_TOKENS = 128


class ChatMessageIn(RequestBody):
    """One turn of a conversation."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant", "tool"]
    content: str = Field(max_length=20_000)


# What `_one_input` checks, as the OpenAPI document states it.
_ONE_INPUT: JsonDict = {
    "oneOf": [
        {"required": ["prompt"], "properties": {"prompt": {"type": "string"}, "messages": {"type": "null"}}},
        {"required": ["messages"], "properties": {"messages": {"type": "array"}, "prompt": {"type": "null"}}},
    ]
}


class GenerateIn(RequestBody):
    """A prompt (or a conversation) to answer with a job's model, and how to decode."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_ONE_INPUT)

    prompt: str | None = Field(None, max_length=20_000, description="Plain prompt; for a chat model, one user turn.")
    messages: list[ChatMessageIn] | None = Field(
        None, max_length=200, description="Conversation ending with a user turn."
    )
    checkpoint: int | None = Field(
        None, ge=0, le=SQL_INT_MAX, description="Step of a committed checkpoint; the final model if absent."
    )
    max_new_tokens: int = Field(DEFAULT_NEW_TOKENS, ge=1, le=MAX_NEW_TOKENS)
    temperature: float = Field(1.0, gt=0, le=10)
    top_p: float = Field(1.0, gt=0, le=1)
    do_sample: bool = Field(False, description="Sample (seeded) instead of greedy decoding.")
    seed: int = Field(0, ge=0, le=SEED_MAX)
    compare_base: bool = Field(True, description="Also answer with the base model, side by side.")

    @model_validator(mode="after")
    def _one_input(self) -> GenerateIn:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt or messages")
        return self


class ExportIn(RequestBody):
    """What to export: the format, and the checkpoint step (the final model if absent)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["adapter", "merged", "bundle"]
    checkpoint: int | None = Field(None, ge=0, le=SQL_INT_MAX)
    allow_base_mismatch: bool = Field(False, description="Merge even if the job's base model is not the pinned one.")
    max_shard_size: str = Field("5GB", pattern=r"^[1-9][0-9]*(KB|MB|GB)$")


class ExportOut(BaseModel):
    """A committed export: where it is stored and how to download it."""

    name: str = Field(description="`<format>-<final|step-N>`.")
    format: str
    source: str
    contents: str = Field(description="`adapter`, `merged_model` or `full_model` (a full fine-tune).")
    storage_prefix: str
    archive_url: str
    files: list[StoredFileOut]
    total_bytes: int
    pin: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
