"""Cloning a job: a copy of one of the caller's jobs with config changes, or with another base model or data.

A clone that keeps its inputs is copied by the job store from its source (`clone_with_changes`);
one whose whole config, base model or data differ is queued like a new job. Either way the checks
(the data fits a changed task, the base model's code is allowed, the job it starts from still has
its model) and the new job are one transaction holding the caller's row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tunedeck.config.loading import validate_config
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue, NotFoundError
from tunedeck.service.context import ServiceContext
from tunedeck.service.datasets.dataset_store import refuse_unfit_rows
from tunedeck.service.jobs.job_creation import TrainingData, enqueue_training_job
from tunedeck.service.jobs.job_guards import read_job_guards
from tunedeck.service.jobs.request_fields import check_job_parent, issues_in_body
from tunedeck.service.users.storage_quota import stored_bytes_if_limited
from tunedeck.store.access import Actor
from tunedeck.store.base_models import refuse_unallowed_remote_code
from tunedeck.store.models import Job


@dataclass(frozen=True)
class CloneChanges:
    """What a clone changes from its source (`POST /jobs/{id}/clone`'s body)."""

    config: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    priority: int | None = None
    replace_config: bool = False
    base_model_id: str | None = None
    train_dataset_id: str | None = None

    @property
    def new_inputs(self) -> bool:
        """Whether the clone is queued like a new job (a whole config, another base model or data)."""
        return self.replace_config or self.base_model_id is not None or self.train_dataset_id is not None


def validated_config(config: dict[str, Any]) -> TrainingConfig:
    """`config` checked as a whole; ConfigError naming `config.<key>` as a request body holds it."""
    try:
        return validate_config(config)
    except ConfigError as error:
        raise issues_in_body(error) from None


def queue_clone(context: ServiceContext, user: Actor, job_id: str, changes: CloneChanges) -> Job:
    """Queue a copy of `user`'s job `job_id` with `changes`, as the module says; NotFoundError for another's job."""
    with context.jobs.transaction(for_user=user.id):
        source = context.jobs.jobs.get(user, job_id)
        if changes.new_inputs:
            return _clone_with_new_inputs(context, user, source, changes)
        return _clone_with_changes(context, user, source, changes)


def _clone_with_changes(context: ServiceContext, user: Actor, source: Job, changes: CloneChanges) -> Job:
    merged = {**source.config, **changes.config}
    if "task" in changes.config:
        _refuse_data_unfit_for(context, user, source, validated_config(merged).task)
    if source.base_model_id is not None:
        base = context.jobs.base_models.get(user, source.base_model_id)
        refuse_unallowed_remote_code(bool(merged.get("trust_remote_code")), base)
        if merged.get("init_from_job"):
            # The starting job may have been deleted, or lost its model, since the source was queued.
            check_job_parent(context, user, validated_config(merged), source.base_model_id)
    try:
        return context.jobs.jobs.clone_with_changes(
            user,
            source.id,
            changes=changes.config,
            name=changes.name,
            priority=changes.priority,
            stored_bytes=stored_bytes_if_limited(context, user.id),
            # A clone is judged by the same guards as its source (read where older jobs kept them).
            guards=read_job_guards(context.artifacts, source),
        )
    except ConfigError as error:
        raise issues_in_body(error) from None


def _clone_with_new_inputs(context: ServiceContext, user: Actor, source: Job, changes: CloneChanges) -> Job:
    """A clone queued like a new job: the datasets and the base model are checked as for `POST /jobs`.

    It keeps its source's experiment, guards and tags, and names its source.
    """
    config = validated_config(dict(changes.config) if changes.replace_config else {**source.config, **changes.config})
    base_model_id = changes.base_model_id or source.base_model_id
    train = changes.train_dataset_id or source.train_dataset_version_id
    if base_model_id is None or train is None:
        missing = "base_model_id" if base_model_id is None else "train_dataset_id"
        raise ConfigError(
            [
                Issue(
                    f"the source job's {missing.removesuffix('_id').replace('_', ' ')} was deleted",
                    field=missing,
                    expected="an id of yours to train with instead",
                )
            ]
        )
    validation = str(config.validation_dataset_id) if config.validation_dataset_id is not None else None
    return enqueue_training_job(
        context,
        user,
        config,
        base_model_id=base_model_id,
        data=TrainingData(train=train, validation=validation, validation_field="config.validation_dataset_id"),
        name=changes.name or f"{source.name} (clone)",
        experiment_id=source.experiment_id,
        priority=source.priority if changes.priority is None else changes.priority,
        guards=read_job_guards(context.artifacts, source),
        tags=source.tags,
        cloned_from_id=source.id,
    )


def _refuse_data_unfit_for(context: ServiceContext, user: Actor, source: Job, task: str) -> None:
    """A clone that changes the task keeps its source's datasets: they must fit the new task (422 naming them)."""
    fields = {
        "train_dataset_version_id": source.train_dataset_version_id,
        "validation_dataset_version_id": source.validation_dataset_version_id,
    }
    for name, version_id in fields.items():
        if version_id is None:
            continue
        try:
            version = context.jobs.datasets.get_version(user, version_id)
        except NotFoundError:
            continue  # a deleted version: the job store answers for it as for any clone
        refuse_unfit_rows(version, task, name, version_id)
