"""Generation (playground) and export requests and answers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict

from tunedeck.api.schemas.checkpoints import StoredFileOut
from tunedeck.api.schemas.common import SEED_MAX, SQL_INT_MAX, RequestBody
from tunedeck.core.mlx_export import DEFAULT_MLX_DTYPE, MlxContents, MlxDtype, MlxExportOptions

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
    """What to export: the format, and the checkpoint step (the final model if absent).

    `mlx` builds a folder `mlx_lm.load` opens on Apple silicon; `dtype`, `quantize_bits`,
    `mlx_contents` and `unified_memory_gb` apply to it alone.
    """

    model_config = ConfigDict(extra="forbid")

    format: Literal["adapter", "merged", "bundle", "mlx"]
    checkpoint: int | None = Field(None, ge=0, le=SQL_INT_MAX)
    allow_base_mismatch: bool = Field(False, description="Merge even if the job's base model is not the pinned one.")
    max_shard_size: str = Field("5GB", pattern=r"^[1-9][0-9]*(KB|MB|GB)$")
    dtype: MlxDtype | None = Field(None, description="MLX only: the weights' dtype (default float16).")
    quantize_bits: Literal[4, 8] | None = Field(
        None, description="MLX only: quantise the merged model's weights with mlx-lm to 4 or 8 bits."
    )
    mlx_contents: MlxContents | None = Field(
        None, description="MLX only: `merged` (default), or `adapter`: the converted base with the adapter beside it."
    )
    unified_memory_gb: float | None = Field(
        None, gt=0, le=4096, description="MLX only: refuse the export unless it fits a Mac with this much memory."
    )

    @model_validator(mode="after")
    def _mlx_options_for_mlx(self) -> ExportIn:
        if self.format != "mlx":
            given = [name for name in _MLX_ONLY if getattr(self, name) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} applies to the mlx format only")
        elif self.quantize_bits is not None and self.mlx_contents == "adapter":
            raise ValueError("quantize_bits applies to a merged MLX export, not to mlx_contents adapter")
        return self

    def mlx_options(self) -> MlxExportOptions | None:
        """The MLX export's options (defaults filled in); None for the other formats."""
        if self.format != "mlx":
            return None
        return MlxExportOptions(
            contents=self.mlx_contents or "merged", dtype=self.dtype or DEFAULT_MLX_DTYPE,
            quantize_bits=self.quantize_bits,
        )


_MLX_ONLY = ("dtype", "quantize_bits", "mlx_contents", "unified_memory_gb")


class ExportOut(BaseModel):
    """A committed export: where it is stored and how to download it."""

    name: str = Field(description="`<format>-<final|step-N>`.")
    format: str
    source: str
    contents: str = Field(
        description="`adapter`, `merged_model`, `full_model` (a full fine-tune) or `base_and_adapter` (MLX)."
    )
    storage_prefix: str
    archive_url: str
    files: list[StoredFileOut]
    total_bytes: int
    pin: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
    mlx: dict[str, Any] | None = Field(None, description="An MLX export's layout, dtype and quantisation.")
