"""Fine-tuned model names in the client's form: `ft:<base model>:<suffix>:<job id>[:ckpt-step-<N>]`.

The job id is the last part (before a checkpoint's `ckpt-step-N`), so a base model name
holding `:` still parses; a job without a suffix is `ft:<base>::<job id>`, as the
client's API writes it. A checkpoint's name adds `:ckpt-step-<N>`. A job's base model is named as
the `/v1` request that created it named it, else as registered now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tunedeck.core.errors import NotFoundError
from tunedeck.service.context import ServiceContext
from tunedeck.store.access import Actor
from tunedeck.store.models import FineTuningRequest, Job

PREFIX = "ft:"
_CHECKPOINT = re.compile(r":ckpt-step-(\d{1,18})$")  # a step a database integer holds: longer is no checkpoint


@dataclass(frozen=True)
class FineTunedName:
    """The parts of a fine-tuned model name; `step` is set for a checkpoint's name."""

    base: str
    suffix: str
    job_id: str
    step: int | None = None


def fine_tuned_model_name(base: str, suffix: str | None, job_id: str, step: int | None = None) -> str:
    """The name a job's final model (or its checkpoint at `step`) is known by under `/v1`."""
    name = f"{PREFIX}{base}:{suffix or ''}:{job_id}"
    return name if step is None else f"{name}:ckpt-step-{step}"


def parse_fine_tuned_name(name: str) -> FineTunedName | None:
    """The parts of `name`, or None when it is not a fine-tuned model name (a base model's, say)."""
    if not name.startswith(PREFIX):
        return None
    rest = name[len(PREFIX) :]
    step = None
    if checkpoint := _CHECKPOINT.search(rest):
        step = int(checkpoint.group(1))
        rest = rest[: checkpoint.start()]
    rest, _, job_id = rest.rpartition(":")
    base, _, suffix = rest.rpartition(":")
    if not base or not job_id:
        return None
    return FineTunedName(base=base, suffix=suffix, job_id=job_id, step=step)


def base_model_name(context: ServiceContext, user: Actor, job: Job, request: FineTuningRequest | None) -> str:
    """The name of the job's base model: as it was when the job was created under `/v1`, else as registered now."""
    if request is not None:
        return request.model
    if job.base_model_id is None:
        return ""
    try:
        return context.jobs.base_models.get(user, job.base_model_id).name
    except NotFoundError:
        return job.base_model_id
