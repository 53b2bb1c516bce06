"""Jobs that start from another job's model (`init_from_job`): which parent a new job may name, and its children.

A job may start from one of its owner's own jobs only: one that succeeded (its final model)
or, with `init_from_checkpoint`, one with a committed checkpoint at that step; and only on
the same base model, since a chained model trains on the base it was made from. Another
user's job reads as no such job, exactly as an unknown id does.

The parent is recorded in the child's config (`init_from_job`); the children of a job are
found among its owner's jobs (a job never starts from another user's).
"""

from __future__ import annotations

from collections.abc import Sequence

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue, MissingReferenceError, NotFoundError
from tunedeck.core.states import JobState
from tunedeck.service.jobs.job_models import locate_job_model
from tunedeck.storage.base import ArtifactStore, final_prefix
from tunedeck.store.access import Actor
from tunedeck.store.checkpoints import COMMITTED
from tunedeck.store.models import Job
from tunedeck.store.store import JobStore

PARENT_FIELD = "init_from_job"
STEP_FIELD = "init_from_checkpoint"


def check_parent(
    store: JobStore, artifacts: ArtifactStore, actor: Actor, owner_id: str, config: TrainingConfig, base_model_id: str
) -> Job | None:
    """The job `config` starts from, checked for a job of `owner_id` on `base_model_id`; None when it names none.

    MissingReferenceError naming `init_from_job` when the owner has no such job (another user's
    reads the same); ConfigError naming `init_from_job` (or `init_from_checkpoint`) when it has no
    such model yet, or was trained on another base model.
    """
    parent_id = config.init_from_job
    if parent_id is None:
        return None
    try:
        parent = store.jobs.get(actor, str(parent_id))
    except NotFoundError:
        parent = None
    if parent is None or parent.owner_id != owner_id:  # another user's job is not named, even to an admin
        raise MissingReferenceError(
            [Issue(f"no such job: {parent_id!r}", field=PARENT_FIELD, expected="the id of one of your jobs")],
            title="no such job",
        )
    if parent.base_model_id != base_model_id:
        raise ConfigError(
            [
                Issue(
                    f"job {parent.id!r} was trained on another base model: a job starts from a model on the base "
                    "that model was made from",
                    field=PARENT_FIELD,
                    expected=f"base_model_id {parent.base_model_id}",
                    found=base_model_id,
                )
            ]
        )
    step = config.init_from_checkpoint
    if step is None:
        _check_final(artifacts, parent)
    else:
        _check_checkpoint(store, actor, parent, step)
    if locate_job_model(store, artifacts, actor, parent.id, step).starting_weights is not None:
        raise ConfigError(
            [
                Issue(
                    f"job {parent.id!r} trained an adapter on top of another job's full weights, not on the base "
                    "model, so a job cannot continue it; start from a job whose adapter was trained on the base, "
                    "or from full weights",
                    field=PARENT_FIELD,
                )
            ]
        )
    return parent


def _check_final(artifacts: ArtifactStore, parent: Job) -> None:
    if parent.state == JobState.SUCCEEDED.value and artifacts.read_manifest(final_prefix(parent.owner_id, parent.id)):
        return
    raise ConfigError(
        [
            Issue(
                f"job {parent.id!r} has no final model (state {parent.state}): start from a job that succeeded, "
                f"or name one of its committed checkpoints with {STEP_FIELD}",
                field=PARENT_FIELD,
                expected="a succeeded job",
                found=parent.state,
            )
        ]
    )


def _check_checkpoint(store: JobStore, actor: Actor, parent: Job, step: int) -> None:
    try:
        committed = store.checkpoints.get(actor, parent.id, step).state == COMMITTED
    except NotFoundError:
        committed = False
    if committed:
        return
    steps = sorted(checkpoint.step for checkpoint in store.checkpoints.committed(parent.id))
    raise ConfigError(
        [
            Issue(
                f"job {parent.id!r} has no committed checkpoint at step {step}",
                field=STEP_FIELD,
                expected=f"one of {steps}" if steps else "a committed checkpoint (the job has none)",
                found=str(step),
            )
        ]
    )


def started_from(store: JobStore, jobs: Sequence[Job]) -> list[Job]:
    """Every job that started from one of `jobs`' models, directly or down a chain, oldest first (`jobs` excluded)."""
    reached = {job.id for job in jobs}
    found: dict[str, Job] = {}
    for owner_id in sorted({job.owner_id for job in jobs}):
        owned = store.deletions.owned_by(owner_id)[0]
        grew = True
        while grew:  # a child of a child is reached too
            grew = False
            for job in owned:
                parent = (job.config or {}).get(PARENT_FIELD)
                if parent in reached and job.id not in reached:
                    reached.add(job.id)
                    found[job.id] = job
                    grew = True
    return sorted(found.values(), key=lambda job: job.id)
