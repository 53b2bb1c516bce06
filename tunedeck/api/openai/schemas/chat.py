"""`/v1/chat/completions` request and answers, in the official client's shapes.

The request takes every field the client sends for a chat completion: those tunedeck
cannot honour (other choices than one, log probabilities, penalties, a JSON answer) are
refused by `chat_request` naming the field, never ignored; a field the client's API does not
have is refused here. Answers follow `openai.types.chat.ChatCompletion` and `ChatCompletionChunk`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tunedeck.api.schemas.common import SEED_MAX, RequestBody
from tunedeck.api.schemas.exports import MAX_NEW_TOKENS

MESSAGE_CHARS = 100_000
MAX_MESSAGES = 500
MAX_TEMPERATURE: float = 2  # written as 2 in the OpenAPI document and the playground


class ChatMessageIn(RequestBody):
    """One turn: a role and its content (text, or a list of content parts of which only text is read)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    role: Literal["developer", "system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = Field(None, description="An assistant's earlier tool calls.")
    tool_call_id: str | None = Field(None, description="The call a tool message answers.")
    refusal: str | None = None


class StreamOptionsIn(RequestBody):
    """How to stream: `include_usage` adds a last chunk with the token counts."""

    model_config = ConfigDict(strict=True, extra="forbid")

    include_usage: bool = False


class ChatCompletionIn(RequestBody):
    """A chat completion request, as the client sends it."""

    model_config = ConfigDict(strict=True, extra="forbid")

    model: str = Field(
        min_length=1, description="A fine-tuned model (`ft:...`), a checkpoint of one, or a base model's name or id."
    )
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    temperature: float | None = Field(
        None, ge=0, le=MAX_TEMPERATURE, description="0 decodes greedily; the default is 1."
    )
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1, description=f"At most {MAX_NEW_TOKENS}.")
    max_completion_tokens: int | None = Field(None, ge=1, description="Wins over max_tokens.")
    stop: str | list[str] | None = Field(None, description="Up to 4 strings; the answer ends before the first one.")
    seed: int | None = Field(None, ge=0, le=SEED_MAX, description="The same value samples the same answer.")
    n: int | None = Field(None, description="Only 1.")
    stream: bool | None = False
    stream_options: StreamOptionsIn | None = None
    tools: list[dict[str, Any]] | None = Field(None, description="Function definitions given to the chat template.")
    tool_choice: str | dict[str, Any] | None = Field(None, description='"auto" or "none".')
    parallel_tool_calls: bool | None = None
    user: str | None = None
    response_format: dict[str, Any] | None = Field(None, description='Only {"type": "text"}.')
    logprobs: bool | None = None
    top_logprobs: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: dict[str, Any] | None = None


class UsageOut(BaseModel):
    """Tokens read and written, counted with the model's tokenizer."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessageOut(BaseModel):
    """The answer."""

    role: Literal["assistant"] = "assistant"
    content: str | None


FinishReason = Literal["stop", "length"]


class ChoiceOut(BaseModel):
    """The one choice of a completion."""

    index: int = 0
    message: AssistantMessageOut
    finish_reason: FinishReason
    logprobs: None = None


class ChatCompletionOut(BaseModel):
    """A whole answer (`openai.types.chat.ChatCompletion`)."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: UsageOut


class DeltaOut(BaseModel):
    """What a chunk adds: the role (first chunk), text."""

    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoiceOut(BaseModel):
    """The one choice of a chunk; `finish_reason` on the last."""

    index: int = 0
    delta: DeltaOut
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunkOut(BaseModel):
    """One streamed event (`openai.types.chat.ChatCompletionChunk`); the usage chunk has no choices."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoiceOut]
    usage: UsageOut | None = None
