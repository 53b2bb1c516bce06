"""Queue a training job from a validated config: the one path `POST /jobs` and `POST /v1/fine_tuning/jobs` share.

The caller validates the config and names the request's fields; this checks the base
model's code allowance, resolves the datasets (a sealed test set, deleted data or rows
unfit for the task are a 422 naming the request's field) and enqueues the job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tunedeck.config.training import TrainingConfig
from tunedeck.service.context import ServiceContext
from tunedeck.service.datasets.dataset_store import resolve_training_version_id
from tunedeck.service.users.storage_quota import stored_bytes_if_limited
from tunedeck.store.access import Actor
from tunedeck.store.base_models import refuse_unallowed_remote_code
from tunedeck.store.models import Job


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
