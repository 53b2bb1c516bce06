"""Queue a training job from a validated config: the one path `POST /jobs` and `POST /v1/fine_tuning/jobs` share.

The caller validates the config and names the request's fields; this checks the job the
config starts from, the base model's code allowance, resolves the datasets (a sealed test
set, deleted data or rows unfit for the task are a 422 naming the request's field) and
enqueues the job, all in one transaction holding the caller's row: a parent job deleted
or a dataset removed meanwhile cannot slip between the checks and the new job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tunedeck.config.training import TrainingConfig
from tunedeck.service.context import ServiceContext
from tunedeck.service.datasets.dataset_store import resolve_training_version_id
from tunedeck.service.jobs.request_fields import check_job_parent
from tunedeck.service.users.storage_quota import stored_bytes_if_limited
from tunedeck.store.access import Actor
from tunedeck.store.base_models import refuse_unallowed_remote_code
from tunedeck.store.models import FineTuningRequest, Job


@dataclass(frozen=True)
class TrainingData:
    """The datasets a job trains and validates on, as the request names them and the fields naming them."""

    train: str
    validation: str | None = None
    train_field: str = "train_dataset_id"
    validation_field: str = "validation_dataset_id"


def enqueue_training_job(
    context: ServiceContext,
    user: Actor,
    config: TrainingConfig,
    *,
    base_model_id: str,
    data: TrainingData,
    name: str,
    experiment_id: str | None = None,
    priority: int = 0,
    devices_needed: int | None = None,
    guards: Sequence[str] = (),
    tags: Sequence[str] = (),
    cloned_from_id: str | None = None,
) -> Job:
    """Queue a job of `user` training `config` on `data` from base model `base_model_id`, as the module says."""
    with context.jobs.transaction(for_user=user.id):
        check_job_parent(context, user, config, base_model_id)
        if config.trust_remote_code:
            base = context.jobs.base_models.get(user, base_model_id)
            refuse_unallowed_remote_code(True, base)
        task = config.task
        train_version = resolve_training_version_id(context, user, data.train, data.train_field, task=task)
        validation_version = (
            resolve_training_version_id(context, user, data.validation, data.validation_field, task=task)
            if data.validation
            else None
        )
        if validation_version is not None:
            # The job's config names the exact version it evaluates on, like the job row does.
            config = config.model_copy(update={"validation_dataset_id": validation_version})
        return context.jobs.jobs.enqueue(
            user,
            name=name,
            config=config,
            base_model_id=base_model_id,
            train_dataset_version_id=train_version,
            validation_dataset_version_id=validation_version,
            experiment_id=experiment_id,
            priority=priority,
            devices_needed=devices_needed,
            stored_bytes=stored_bytes_if_limited(context, user.id),
            guards=guards,
            tags=tags,
            cloned_from_id=cloned_from_id,
        )


@dataclass(frozen=True)
class RequestRecord:
    """What an OpenAI-style fine-tuning request asked with, kept beside its job (`fine_tuning_requests`)."""

    model: str
    suffix: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    method: dict[str, Any] = field(default_factory=dict)
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    integrations: list[dict[str, Any]] = field(default_factory=list)


def enqueue_requested_job(
    context: ServiceContext,
    user: Actor,
    config: TrainingConfig,
    *,
    base_model_id: str,
    data: TrainingData,
    name: str,
    request: RequestRecord,
) -> tuple[Job, FineTuningRequest]:
    """Queue a job as `enqueue_training_job` does and keep its request with it, in the same transaction."""
    with context.jobs.transaction(for_user=user.id):
        job = enqueue_training_job(context, user, config, base_model_id=base_model_id, data=data, name=name)
        recorded = context.jobs.fine_tuning_requests.record(
            job.id,
            model=request.model,
            suffix=request.suffix,
            metadata=request.metadata,
            method=request.method,
            hyperparameters=request.hyperparameters,
            integrations=request.integrations,
        )
    return job, recorded
