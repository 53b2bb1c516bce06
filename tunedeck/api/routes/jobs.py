"""Training jobs: create, list (filters, cursor pages), get, cancel, pause, resume, clone, delete."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse

from tunedeck.api.auth import CurrentUser, Principal
from tunedeck.api.context import Context
from tunedeck.api.routes.deletions import DELETE_RESPONSES, deletion_accepted
from tunedeck.api.schemas.common import SQL_INT_MAX, ErrorOut
from tunedeck.api.schemas.jobs import JobClone, JobCreate, JobOut, JobPage, JobTagsIn
from tunedeck.core.errors import (
    ConfigError,
    ForbiddenError,
    Issue,
)
from tunedeck.core.states import JobState
from tunedeck.service.jobs.job_cloning import CloneChanges, queue_clone, validated_config
from tunedeck.service.jobs.job_creation import TrainingData, enqueue_training_job
from tunedeck.service.jobs.job_guards import normalized_guards
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.service.privacy.retention_dates import job_schedule, scheduled_at
from tunedeck.service.users.storage_quota import storage_meter, stored_bytes_if_limited
from tunedeck.store.jobs import JobSort
from tunedeck.store.models import Job

DEFAULT_PRIORITY = 0

router = APIRouter(prefix="/jobs", tags=["jobs"])
_ERRORS: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}}
_FORBIDDEN = {"model": ErrorOut, "description": "A priority above 0 (admins only), or a base model's code not allowed."}


def job_out(job: Job) -> JobOut:
    """The wire form of a job row."""
    return JobOut(
        id=job.id,
        name=job.name,
        state=JobState(job.state),
        priority=job.priority,
        devices_needed=job.devices_needed,
        base_model_id=job.base_model_id,
        train_dataset_version_id=job.train_dataset_version_id,
        validation_dataset_version_id=job.validation_dataset_version_id,
        config=job.config,
        attempt=job.attempt,
        requested_action=job.requested_action,
        resume_from_step=job.resume_from_step,
        error=job.error_message,
        diagnosis=job.diagnosis,
        cloned_from=job.cloned_from_id,
        experiment_id=job.experiment_id,
        tags=job.tags,
        created_at=job.created_at,
        updated_at=job.updated_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
    )


@router.post(
    "",
    response_model=JobOut,
    status_code=status.HTTP_201_CREATED,
    responses={**_ERRORS, 403: _FORBIDDEN, 422: {"model": ErrorOut}},
)
def create_job(body: JobCreate, user: CurrentUser, context: Context) -> JobOut:
    """Queue a training job; 422 names each bad config field or guard, 404 an unknown model or dataset.

    The datasets' rows must fit the task (chat or text rows train sft, preference pairs dpo, ...):
    a dataset that cannot train it is a 422 naming its field.

    A sealed test set is refused as training or validation data (422 naming the field):
    it is read only by the explicit final evaluation of a chosen job. `guards` are kept
    with the job and checked by `GET /jobs/{id}/report`.
    """
    _refuse_raised_priority(user, body.priority)
    config = validated_config(body.config)
    validation_ref = body.validation_dataset_id
    in_config = config.validation_dataset_id
    if validation_ref is None and in_config is not None:
        validation_ref = str(in_config)
    elif validation_ref is not None and in_config is not None and str(in_config) != validation_ref:
        raise ConfigError(
            [
                Issue(
                    "differs from validation_dataset_id of the request",
                    field="config.validation_dataset_id",
                    expected=validation_ref,
                    found=str(in_config),
                )
            ]
        )
    guards = normalized_guards(body.guards)  # before anything is stored: 422 names guards[i]
    job = enqueue_training_job(
        context,
        user,
        config,
        base_model_id=body.base_model_id,
        data=TrainingData(train=body.train_dataset_id, validation=validation_ref),
        name=body.name,
        experiment_id=body.experiment_id,
        priority=body.priority,
        devices_needed=body.devices_needed,
        guards=guards,
        tags=body.tags,
    )
    return job_out(job)


def _refuse_raised_priority(user: Principal, priority: int | None) -> None:
    """Members queue at the default priority or below; only an admin may put a job ahead of others."""
    if priority is not None and priority > DEFAULT_PRIORITY and not user.is_admin:
        raise ForbiddenError(
            f"priority {priority}: only an admin can queue a job above the default priority ({DEFAULT_PRIORITY})"
        )


@router.get("", response_model=JobPage)
def list_jobs(
    user: CurrentUser,
    context: Context,
    state: list[JobState] | None = Query(None, description="Only jobs in these states (repeatable)."),
    name: str | None = Query(None, max_length=200, description="Substring of the name, any case."),
    dataset_id: str | None = Query(
        None, max_length=40, description="Only jobs trained or evaluated on a version of this dataset."
    ),
    base_model_id: str | None = Query(None, max_length=40, description="Only jobs of this base model."),
    tag: str | None = Query(None, max_length=32, description="Only jobs with this tag."),
    sort: JobSort = Query(
        JobSort.CREATED,
        description="created, name, state or duration (start to end, or so far; never started last).",
    ),
    order: Literal["asc", "desc"] = Query("desc", description="asc or desc."),
    limit: int = Query(50, ge=1, le=200),
    cursor: str | None = Query(
        None,
        max_length=40,
        pattern=r"^([0-9a-vA-V]{11}.+|@[0-9]{1,9})$",
        description="next_cursor of the previous page (with the same sort and filters).",
    ),
) -> JobPage:
    """The caller's jobs, newest first unless sorted otherwise, one page at a time."""
    page = context.jobs.jobs.list(
        user,
        state=state,
        name=name,
        dataset_id=dataset_id,
        base_model_id=base_model_id,
        tag=tag,
        sort=sort,
        descending=order == "desc",
        limit=limit,
        cursor=cursor,
    )
    return JobPage(items=[job_out(job) for job in page.items], next_cursor=page.next_cursor)


@router.put("/{job_id}/tags", response_model=JobOut, responses={**_ERRORS, 422: {"model": ErrorOut}})
def set_job_tags(job_id: str, body: JobTagsIn, user: CurrentUser, context: Context) -> JobOut:
    """Replace a job's tags, whatever its state; 422 names each tag that breaks the rules."""
    return job_out(context.jobs.jobs.set_tags(user, job_id, body.tags))


@router.get("/{job_id}", response_model=JobOut, responses=_ERRORS)
def get_job(job_id: str, user: CurrentUser, context: Context) -> JobOut:
    """One job; a queued one says which of its owner's quotas it waits on, if any (`waiting_for`), and every one
    when retention policies delete its checkpoints and itself."""
    job = context.jobs.jobs.get(user, job_id)
    out = job_out(job)
    if job.state == JobState.QUEUED.value:
        out.waiting_for = context.jobs.quotas.waiting_reason(job.owner_id, storage_meter(context))
    schedule = job_schedule(context, job.id)
    out.checkpoints_pruned_after = scheduled_at(schedule, "checkpoints")
    out.deleted_after = scheduled_at(schedule, "job")
    return out


@router.post("/{job_id}/cancel", response_model=JobOut, responses=_ERRORS)
def cancel_job(job_id: str, user: CurrentUser, context: Context) -> JobOut:
    """Cancel: a queued or paused job at once, a running one when its worker next heartbeats."""
    return job_out(context.jobs.jobs.request_cancel(user, job_id))


@router.post("/{job_id}/pause", response_model=JobOut, responses=_ERRORS)
def pause_job(job_id: str, user: CurrentUser, context: Context) -> JobOut:
    """Pause a running job: it writes a checkpoint, then stops (state pausing, then paused)."""
    return job_out(context.jobs.jobs.request_pause(user, job_id))


@router.post("/{job_id}/resume", response_model=JobOut, responses=_ERRORS)
def resume_job(
    job_id: str,
    user: CurrentUser,
    context: Context,
    from_step: int | None = Query(
        None,
        ge=0,
        le=SQL_INT_MAX,
        description="Resume from this committed checkpoint (later ones are dropped); newest if absent.",
    ),
) -> JobOut:
    """Requeue a paused, failed or cancelled job from its newest committed checkpoint, or from `from_step`."""
    owner = context.jobs.jobs.get(user, job_id).owner_id
    stored_bytes = stored_bytes_if_limited(context, owner)
    if from_step is None:
        return job_out(context.jobs.jobs.resume(user, job_id, stored_bytes=stored_bytes))
    job, dropped = context.jobs.jobs.resume_from(user, job_id, from_step, stored_bytes=stored_bytes)
    for prefix in dropped:  # only once the rewind and the resume are both committed
        context.artifacts.delete_prefix(prefix)
    return job_out(job)


@router.post(
    "/{job_id}/clone",
    response_model=JobOut,
    status_code=status.HTTP_201_CREATED,
    responses={**_ERRORS, 403: _FORBIDDEN, 422: {"model": ErrorOut}},
)
def clone_job(job_id: str, body: JobClone, user: CurrentUser, context: Context) -> JobOut:
    """Queue a copy of a job with config changes, validated as a whole (422 names the field).

    `replace_config` sends the whole config (a key left out takes its default, not the source's
    value); `base_model_id` and `train_dataset_id` train the copy on another model or dataset.
    """
    context.jobs.jobs.get(user, job_id)  # an unknown job is a 404 before anything about the body
    _refuse_raised_priority(user, body.priority)
    changes = CloneChanges(
        config=dict(body.config),
        name=body.name,
        priority=body.priority,
        replace_config=body.replace_config,
        base_model_id=body.base_model_id,
        train_dataset_id=body.train_dataset_id,
    )
    return job_out(queue_clone(context, user, job_id, changes))


@router.delete("/{job_id}", status_code=status.HTTP_202_ACCEPTED, response_model=None, responses=DELETE_RESPONSES)
def delete_job(
    job_id: str,
    user: CurrentUser,
    context: Context,
    with_models: bool = Query(
        False, description="Also delete the jobs that started from this job's model (else 409 lists them)."
    ),
) -> JSONResponse:
    """Delete a job that is not running: its rows at once, then every copy (storage, worker folders); the receipt."""
    return deletion_accepted(request_deletion(context.jobs, user, "job", job_id, with_models=with_models))
