"""What the job page's playground needs to chat with a job's models through `/v1/chat/completions`.

The playground streams its answers from the same chat completions route as any client
of the OpenAI-compatible API (the dashboard's session cookie signs it in there too), so
it names models as that route does: the fine-tuned model (or one of its checkpoints) and
the base model by id. Its sampling limits are the route's.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunedeck.api.auth import Principal
from tunedeck.api.context import ApiContext
from tunedeck.api.openai.schemas.chat import MAX_TEMPERATURE
from tunedeck.api.schemas.common import SEED_MAX
from tunedeck.api.schemas.exports import DEFAULT_NEW_TOKENS, MAX_NEW_TOKENS
from tunedeck.service.models.model_names import base_model_name, fine_tuned_model_name
from tunedeck.store.models import Job

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class SamplingLimits:
    """The bounds the chat completions route accepts, for the playground's fields to state and check."""

    max_new_tokens: int = MAX_NEW_TOKENS
    default_new_tokens: int = DEFAULT_NEW_TOKENS
    max_temperature: float = MAX_TEMPERATURE
    max_seed: int = SEED_MAX


@dataclass(frozen=True)
class PlaygroundModels:
    """The names the playground asks for: the fine-tuned model's (final or at a step) and the base model's id."""

    base_model_id: str | None
    base: str
    suffix: str | None
    job_id: str

    def fine_tuned(self, step: int | None = None) -> str:
        """The model name of the final model, or of the checkpoint at `step`."""
        return fine_tuned_model_name(self.base, self.suffix, self.job_id, step)


def playground_models(context: ApiContext, user: Principal, job: Job) -> PlaygroundModels:
    """The playground's model names for `job`, as `/v1/models` lists them."""
    request = context.jobs.fine_tuning_requests.get(job.id)
    return PlaygroundModels(
        base_model_id=job.base_model_id,
        base=base_model_name(context, user, job, request),
        suffix=request.suffix if request else None,
        job_id=job.id,
    )
