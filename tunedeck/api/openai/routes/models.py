"""`/v1/models`: the caller's base models and the fine-tuned models of their succeeded jobs.

A base model's id is its registered name (its id where two of the caller's base models share
that name); a fine-tuned model's is `ft:<base>:<suffix>:<job id>`. Both are what
`fine_tuning.jobs.create(model=...)` and the chat completions take.
"""

from __future__ import annotations

from collections import Counter

from fastapi import APIRouter

from tunedeck.api.auth import CurrentUser, Principal
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.openai.model_lookup import find_model
from tunedeck.api.openai.routes.fine_tuning import fine_tuned_name
from tunedeck.api.openai.schemas.models import ModelDeletedOut, ModelList, ModelOut
from tunedeck.core.errors import Issue, IssueListError
from tunedeck.core.states import JobState
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.store.jobs import MAX_PAGE
from tunedeck.store.models import Job

router = APIRouter(prefix="/models", tags=["models"])


def _succeeded_jobs(context: ApiContext, user: Principal) -> list[Job]:
    """The caller's own succeeded jobs, newest first."""
    jobs: list[Job] = []
    cursor = None
    while True:
        page = context.jobs.jobs.list(user, state=JobState.SUCCEEDED, limit=MAX_PAGE, cursor=cursor)
        jobs += [job for job in page.items if job.owner_id == user.id]
        if page.next_cursor is None:
            return jobs
        cursor = page.next_cursor


@router.get("", response_model=ModelList)
def list_models(user: CurrentUser, context: Context) -> ModelList:
    """The caller's base models (oldest first), then the fine-tuned models of their succeeded jobs (newest first)."""
    bases = [row for row in context.jobs.base_models.list(user) if row.owner_id == user.id]
    names = Counter(row.name for row in bases)
    models = [
        ModelOut(id=row.name if names[row.name] == 1 else row.id, created=int(row.created_at.timestamp()),
                 owned_by=user.id)
        for row in bases
    ]  # fmt: skip
    jobs = _succeeded_jobs(context, user)
    requests = context.jobs.fine_tuning_requests.for_jobs(job.id for job in jobs)
    for job in jobs:
        finished = job.finished_at or job.updated_at
        models.append(
            ModelOut(
                id=fine_tuned_name(context, user, job, requests.get(job.id)),
                created=int(finished.timestamp()),
                owned_by=user.id,
            )
        )
    return ModelList(data=models)


@router.get("/{model:path}", response_model=ModelOut)
def retrieve_model(model: str, user: CurrentUser, context: Context) -> ModelOut:
    """One model the caller may use, by the name `GET /v1/models` lists (or a checkpoint's name); 404 otherwise."""
    found = find_model(context.jobs, context.artifacts, user, model)
    made = found.job.finished_at or found.job.updated_at if found.job is not None else found.base.created_at
    return ModelOut(id=model, created=int(made.timestamp()), owned_by=user.id)


@router.delete("/{model:path}", response_model=ModelDeletedOut)
def delete_model(model: str, user: CurrentUser, context: Context) -> ModelDeletedOut:
    """Delete a model. A fine-tuned model is deleted with its job, through tunedeck's deletion of jobs (the job,
    its checkpoints, metrics and stored files; 409 while jobs start from it); a base model's registration is
    forgotten, as `DELETE /api/v1/base-models/{id}` does (jobs keep their config). A checkpoint's name is a 400:
    delete the job's model instead."""
    found = find_model(context.jobs, context.artifacts, user, model)
    if found.step is not None:
        raise IssueListError(
            [Issue("a checkpoint is deleted with its job's model", field="model",
                   expected="a fine-tuned model's name (without :ckpt-step-N) or a base model", found=model)],
            title="a checkpoint cannot be deleted alone",
        )  # fmt: skip
    if found.job is not None:
        request_deletion(context.jobs, user, "job", found.job.id)
    else:
        context.jobs.base_models.delete(user, found.base.id)
    return ModelDeletedOut(id=model)
