"""What a `model` string under `/v1` names: one of the caller's base models, or a job's fine-tuned model.

A base model is named by its registered name (or its id); a fine-tuned model by
`ft:<base>:<suffix>:<job id>`, a checkpoint by `...:ckpt-step-N` (see `tunedeck.service.models.model_names`).
Another user's model, a name that matches nothing and a job without a final model yet all read as "no such model" (404),
as the client's API answers; a name two of the caller's base models share is a 400
naming both ids, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunedeck.api.auth import Principal
from tunedeck.core.errors import Issue, IssueListError, NotFoundError
from tunedeck.service.jobs.job_models import locate_job_model
from tunedeck.service.models.model_names import parse_fine_tuned_name
from tunedeck.storage.base import ArtifactStore
from tunedeck.store.models import BaseModelRecord, Job
from tunedeck.store.store import JobStore


@dataclass(frozen=True)
class FoundModel:
    """A model the caller may use: a base model, or a job's final model (`job` set) on that base."""

    name: str
    base: BaseModelRecord
    job: Job | None = None
    step: int | None = None  # a committed checkpoint of `job`, rather than its final model


def model_not_found(name: str) -> NotFoundError:
    """The error for a model the caller cannot use, in the client's words."""
    return NotFoundError(f"The model '{name}' does not exist or you do not have access to it.")


def find_base_model(store: JobStore, user: Principal, name: str) -> BaseModelRecord:
    """The caller's base model registered as `name` (or with that id)."""
    matches = [row for row in store.base_models.list(user) if row.owner_id == user.id and name in (row.name, row.id)]
    if not matches:
        raise model_not_found(name)
    if len(matches) > 1:
        ids = ", ".join(row.id for row in matches)
        raise IssueListError(
            [Issue(f"{len(matches)} of your base models are named {name!r}", field="model",
                   expected=f"one of their ids: {ids}", found=name)],
            title="ambiguous model name",
        )  # fmt: skip
    return matches[0]


def find_model(store: JobStore, artifacts: ArtifactStore, user: Principal, name: str) -> FoundModel:
    """The model `name` names, as the module docstring says; NotFoundError (404) otherwise."""
    parsed = parse_fine_tuned_name(name)
    if parsed is None:
        return FoundModel(name=name, base=find_base_model(store, user, name))
    try:
        job = store.jobs.get(user, parsed.job_id)
    except NotFoundError:
        raise model_not_found(name) from None
    if job.owner_id != user.id or job.base_model_id is None:
        raise model_not_found(name)
    base = store.base_models.get(user, job.base_model_id)
    if parsed.base not in (base.name, base.id):
        raise model_not_found(name)
    try:
        locate_job_model(store, artifacts, user, job.id, parsed.step)  # the final model or checkpoint is stored
    except NotFoundError:
        raise model_not_found(name) from None
    return FoundModel(name=name, base=base, job=job, step=parsed.step)
