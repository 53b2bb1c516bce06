"""`/v1/fine_tuning/jobs`: fine-tuning jobs, each a tunedeck job (`job_mapping` holds every mapping rule).

A job is created from a base model, a training file and hyperparameters, then follows
tunedeck's state machine: cancel, pause and resume are tunedeck's own transitions, and one
the job's state does not allow answers 409 naming the states it allows.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from tunedeck.api.auth import CurrentUser, Principal
from tunedeck.api.context import ApiContext, Context
from tunedeck.api.openai.job_mapping import (
    job_error,
    job_status,
    map_request,
    method_out,
    resolved_hyperparameters,
)
from tunedeck.api.openai.job_telemetry import (
    CHECKPOINT_SERIES,
    checkpoint_out,
    event_out,
    parse_event_id,
)
from tunedeck.api.openai.model_lookup import find_base_model
from tunedeck.api.openai.pages import page_after
from tunedeck.api.openai.schemas.fine_tuning import (
    CheckpointList,
    FineTuningJobCreate,
    FineTuningJobList,
    FineTuningJobOut,
    JobEventList,
)
from tunedeck.config.training import TrainingConfig
from tunedeck.core.states import JobState
from tunedeck.service.jobs.job_creation import RequestRecord, TrainingData, enqueue_requested_job
from tunedeck.service.models.model_names import base_model_name, fine_tuned_model_name
from tunedeck.service.users.storage_quota import stored_bytes_if_limited
from tunedeck.store.checkpoints import COMMITTED
from tunedeck.store.jobs import MAX_PAGE, page_cursor
from tunedeck.store.models import FineTuningRequest, Job

router = APIRouter(prefix="/fine_tuning/jobs", tags=["fine-tuning"])
DEFAULT_SEED = TrainingConfig.model_fields["seed"].default
TOKENS_SERIES = "tokens_seen"
METADATA_FILTER = "metadata["


def fine_tuned_name(context: ApiContext, user: Principal, job: Job, request: FineTuningRequest | None) -> str:
    """The name the job's final model is known by (whether or not it exists yet)."""
    return fine_tuned_model_name(
        base_model_name(context, user, job, request), request.suffix if request else None, job.id
    )


def job_out(context: ApiContext, user: Principal, job: Job, request: FineTuningRequest | None) -> FineTuningJobOut:
    """A tunedeck job as the client's FineTuningJob (`job_mapping` says how each field is made)."""
    state = JobState(job.state)
    tokens = context.jobs.telemetry.values_at(user, job.id, [TOKENS_SERIES]).get(TOKENS_SERIES)
    return FineTuningJobOut(
        id=job.id,
        created_at=int(job.created_at.timestamp()),
        finished_at=int(job.finished_at.timestamp()) if state.is_terminal and job.finished_at else None,
        error=job_error(job),
        fine_tuned_model=fine_tuned_name(context, user, job, request) if state is JobState.SUCCEEDED else None,
        hyperparameters=resolved_hyperparameters(job.config),
        model=base_model_name(context, user, job, request),
        organization_id=job.owner_id,
        seed=int(job.config.get("seed", DEFAULT_SEED)),
        status=job_status(job),  # type: ignore[arg-type]
        trained_tokens=int(tokens) if tokens is not None else None,
        training_file=job.train_dataset_version_id or "",
        validation_file=job.validation_dataset_version_id,
        integrations=list(request.integrations) if request is not None and request.integrations else None,
        metadata=dict(request.metadata_pairs) if request is not None and request.metadata_pairs else None,
        method=method_out(job.config),
    )


def _one(context: ApiContext, user: Principal, job: Job) -> FineTuningJobOut:
    return job_out(context, user, job, context.jobs.fine_tuning_requests.get(job.id))


@router.post("", response_model=FineTuningJobOut)
def create_fine_tuning_job(body: FineTuningJobCreate, user: CurrentUser, context: Context) -> FineTuningJobOut:
    """Create a fine-tuning job: a tunedeck job on the base model `model` (a registered name or id) and the
    training file, with the hyperparameters mapped as `job_mapping`'s table says.

    A bad hyperparameter is a 400 naming it (`hyperparameters.n_epochs`, ...); an unknown model or file
    a 404; a file whose rows cannot train the method (chat rows for dpo) a 400 naming `training_file`.
    `integrations` are refused (400) unless the server's job config can report to them.
    """
    base = find_base_model(context.jobs, user, body.model)
    mapped = map_request(body)
    job, request = enqueue_requested_job(
        context,
        user,
        mapped.config,  # a `config` may start from another job's model: checked there
        base_model_id=base.id,
        data=TrainingData(
            train=body.training_file,
            validation=body.validation_file,
            train_field="training_file",
            validation_field="validation_file",
        ),
        name=body.suffix or base.name,
        request=RequestRecord(
            model=base.name,
            suffix=body.suffix,
            metadata=body.metadata or {},
            method={"type": mapped.method, mapped.method: {"hyperparameters": mapped.hyperparameters}},
            hyperparameters=body.hyperparameters.model_dump(exclude_none=True) if body.hyperparameters else {},
            integrations=[integration.model_dump(exclude_none=True) for integration in body.integrations or []],
        ),
    )
    return job_out(context, user, job, request)


def _metadata_filter(request: Request) -> dict[str, str]:
    """The `metadata[key]=value` pairs of the query (the client's way to filter jobs by metadata)."""
    return {
        key[len(METADATA_FILTER) : -1]: value
        for key, value in request.query_params.items()
        if key.startswith(METADATA_FILTER) and key.endswith("]")
    }


@router.get("", response_model=FineTuningJobList)
def list_fine_tuning_jobs(
    request: Request,
    user: CurrentUser,
    context: Context,
    after: str | None = Query(None, max_length=40, description="The last job id of the previous page."),
    limit: int = Query(20, ge=1, le=100),
) -> FineTuningJobList:
    """The caller's jobs, newest first, a page at a time (`has_more` says whether another follows).

    `metadata[key]=value` keeps only jobs created with that metadata pair (every pair given must match).
    """
    wanted = _metadata_filter(request)
    cursor = page_cursor(context.jobs.jobs.get(user, after)) if after else None
    found: list[tuple[Job, FineTuningRequest | None]] = []
    more = False
    while True:
        page = context.jobs.jobs.list(user, limit=MAX_PAGE if wanted else limit + 1, cursor=cursor)
        requests = context.jobs.fine_tuning_requests.for_jobs(job.id for job in page.items)
        for job in page.items:
            pairs = requests[job.id].metadata_pairs if job.id in requests else {}
            if all(pairs.get(key) == value for key, value in wanted.items()):
                found.append((job, requests.get(job.id)))
        if len(found) > limit or page.next_cursor is None:
            more = len(found) > limit
            break
        cursor = page.next_cursor
    return FineTuningJobList(data=[job_out(context, user, job, row) for job, row in found[:limit]], has_more=more)


@router.get("/{fine_tuning_job_id}", response_model=FineTuningJobOut)
def retrieve_fine_tuning_job(fine_tuning_job_id: str, user: CurrentUser, context: Context) -> FineTuningJobOut:
    """One of the caller's jobs (another user's answers 404)."""
    return _one(context, user, context.jobs.jobs.get(user, fine_tuning_job_id))


@router.post("/{fine_tuning_job_id}/cancel", response_model=FineTuningJobOut)
def cancel_fine_tuning_job(fine_tuning_job_id: str, user: CurrentUser, context: Context) -> FineTuningJobOut:
    """Cancel a job: a queued or paused one at once, a running one when its worker next reports (it reports
    `running` until then); 409 for a job that already ended."""
    return _one(context, user, context.jobs.jobs.request_cancel(user, fine_tuning_job_id))


@router.post("/{fine_tuning_job_id}/pause", response_model=FineTuningJobOut)
def pause_fine_tuning_job(fine_tuning_job_id: str, user: CurrentUser, context: Context) -> FineTuningJobOut:
    """Pause a running job: it writes a checkpoint and stops; a paused job reports `queued` (it waits to be
    resumed). 409 for a job that is not running."""
    return _one(context, user, context.jobs.jobs.request_pause(user, fine_tuning_job_id))


@router.post("/{fine_tuning_job_id}/resume", response_model=FineTuningJobOut)
def resume_fine_tuning_job(fine_tuning_job_id: str, user: CurrentUser, context: Context) -> FineTuningJobOut:
    """Requeue a paused (or failed, or cancelled) job from its newest committed checkpoint; 409 otherwise."""
    owner = context.jobs.jobs.get(user, fine_tuning_job_id).owner_id
    job = context.jobs.jobs.resume(user, fine_tuning_job_id, stored_bytes=stored_bytes_if_limited(context, owner))
    return _one(context, user, job)


@router.get("/{fine_tuning_job_id}/events", response_model=JobEventList)
def list_fine_tuning_events(
    fine_tuning_job_id: str,
    user: CurrentUser,
    context: Context,
    after: str | None = Query(None, max_length=40, description="The last event id of the previous page."),
    limit: int = Query(20, ge=1, le=1000),
) -> JobEventList:
    """The job's events, newest first: metric and eval events as `metrics` events (data: step, train_loss,
    valid_loss, ...), the others (phases, checkpoints, diagnoses, logs) as messages."""
    before = parse_event_id(after) if after else None
    # The machine's readings every few seconds are not the client's events: they would bury the run's own.
    rows = context.jobs.telemetry.list_events_newest_first(
        user, fine_tuning_job_id, before_id=before, limit=limit + 1, excluded_types=("system",)
    )
    return JobEventList(data=[event_out(row) for row in rows[:limit]], has_more=len(rows) > limit)


@router.get("/{fine_tuning_job_id}/checkpoints", response_model=CheckpointList)
def list_fine_tuning_checkpoints(
    fine_tuning_job_id: str,
    user: CurrentUser,
    context: Context,
    after: str | None = Query(None, max_length=60, description="The last checkpoint id of the previous page."),
    limit: int = Query(10, ge=1, le=1000),
) -> CheckpointList:
    """The job's committed checkpoints, newest first, each usable as a model by `fine_tuned_model_checkpoint`
    (the fine-tuned model's name and `:ckpt-step-N`); metrics are the job's telemetry at that step."""
    job = context.jobs.jobs.get(user, fine_tuning_job_id)
    committed = [row for row in context.jobs.checkpoints.list_for_job(user, job.id) if row.state == COMMITTED]
    page, more = page_after(committed, after, limit, "desc")
    request = context.jobs.fine_tuning_requests.get(job.id)
    base, suffix = base_model_name(context, user, job, request), request.suffix if request else None
    series = list(CHECKPOINT_SERIES.values())
    data = [
        checkpoint_out(
            row,
            fine_tuned_model_name(base, suffix, job.id, row.step),
            context.jobs.telemetry.values_at(user, job.id, series, row.step),
        )
        for row in page
    ]
    return CheckpointList(
        data=data, has_more=more, first_id=data[0].id if data else None, last_id=data[-1].id if data else None
    )
