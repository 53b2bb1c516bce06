"""What owners' retention policies delete, and when: the plan (a dry run) and the schedule the pages show.

Three rules, each a number of days an owner may set user-wide and per dataset:

- `raw_data_days`: a dataset version's stored rows are deleted that long after its last
  use (its upload, or the creation of the newest job that trained, validated or was
  tested on it); never while a job that has not finished uses it. The version's row stays.
- `checkpoint_days`: that long after a job finished, its committed checkpoints are
  deleted except the best and the newest (its final model is not a checkpoint: it stays).
- `job_days`: that long after a job finished (succeeded, failed, cancelled), the whole
  job is deleted.

Where several policies apply (the owner's, the dataset's), the smallest number of
days wins; the operator's upper bound, when set, applies to everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from tunedeck.service.datasets.dataset_versions import storage_key_prefix
from tunedeck.storage.base import job_prefix
from tunedeck.store.retention import FinishedJob, PolicyValues, RetentionBounds, VersionUse
from tunedeck.store.store import JobStore

ActionKind = Literal["purge_raw_data", "prune_checkpoints", "delete_job"]
PolicyLevel = Literal["dataset", "user", "operator"]
Scheduled = Literal["raw_data", "checkpoints", "job"]
Policies = dict[tuple[str, str | None], PolicyValues]


@dataclass(frozen=True)
class DecidingPolicy:
    """The policy that set a deadline: its level (the dataset's, the owner's, the operator's bound) and days."""

    level: PolicyLevel
    days: int

    def whose(self) -> str:
        """`your policy`, `this dataset's policy` or `the server's limit`, as the pages say it."""
        return {"dataset": "this dataset's policy", "user": "your policy", "operator": "the server's limit"}[self.level]


@dataclass(frozen=True)
class RetentionAction:
    """One deletion a sweep does: what, whose, since when it is due, what it removes, which policy decided it."""

    kind: ActionKind
    owner_id: str
    target_id: str  # a dataset version id or a job id
    label: str
    due_at: datetime
    policy: DecidingPolicy
    prefixes: tuple[str, ...] = ()  # storage folders it removes (a whole job: its job folder)
    checkpoint_steps: tuple[int, ...] = field(default=())


@dataclass(frozen=True)
class ScheduledDeletion:
    """When one thing will be deleted: `at` (None: not scheduled), counted from `after`, by `policy`."""

    what: Scheduled
    at: datetime | None
    after: str  # "its last use" or "it finished"
    policy: DecidingPolicy | None  # None: kept until its owner deletes it
    done: bool = False  # already deleted, on `at`

    def describe(self) -> str:
        """One sentence for the pages: the date and the rule, or that it is kept."""
        subject = {"raw_data": "Raw data", "checkpoints": "Checkpoints other than the best and the newest",
                   "job": "This job"}[self.what]  # fmt: skip
        if self.done and self.at is not None:
            return f"{subject} was deleted on {self.at.date().isoformat()} by its retention policy."
        if self.policy is None:
            return f"{subject}: kept until you delete it."
        rule = f"{self.policy.days} days after {self.after} ({self.policy.whose()})"
        if self.at is None:
            return f"{subject} will be deleted {rule}."
        return f"{subject} will be deleted on {self.at.date().isoformat()}, {rule}."


def deciding_policy(
    policies: Policies, owner_id: str, dataset_id: str | None, name: str, bounds: RetentionBounds
) -> DecidingPolicy | None:
    """The strictest of the dataset's and the owner's `name` days, within the bounds; None: kept forever."""
    candidates: list[DecidingPolicy] = []
    levels: list[tuple[PolicyLevel, str | None]] = [("dataset", dataset_id)] if dataset_id is not None else []
    for level, key in [*levels, ("user", None)]:
        days = policies.get((owner_id, key), PolicyValues()).get(name)
        if days is not None:
            candidates.append(DecidingPolicy(level, bounds.clamp(days)))
    if bounds.max_days is not None:
        candidates.append(DecidingPolicy("operator", bounds.max_days))
    # The first of equal deadlines names the most specific policy.
    return min(candidates, key=lambda policy: policy.days) if candidates else None


def plan_retention(
    store: JobStore, *, now: datetime, bounds: RetentionBounds, owner_id: str | None = None
) -> list[RetentionAction]:
    """Every deletion due at `now` (of one owner, or everyone's); a dry run: nothing is removed.

    A whole job due for deletion is not also listed for checkpoint pruning.
    """
    policies = store.retention.policies(owner_id)
    actions: list[RetentionAction] = []
    for use in store.retention.version_uses(owner_id):
        action = _purge_action(policies, use, bounds)
        if action is not None and action.due_at <= now:
            actions.append(action)
    for job in store.retention.jobs(owner_id):
        deletion = _job_action(policies, job, bounds)
        if deletion is not None and deletion.due_at <= now:
            actions.append(deletion)
            continue
        prune = _prune_action(policies, job, bounds)
        if prune is not None and prune.due_at <= now:
            actions.append(prune)
    return sorted(actions, key=lambda action: (action.due_at, action.kind, action.target_id))


def deletion_schedule(
    store: JobStore, *, bounds: RetentionBounds, dataset_version_id: str | None = None, job_id: str | None = None
) -> list[ScheduledDeletion]:
    """When a dataset version's raw data, or a job's checkpoints and the job itself, will be deleted.

    Give one of `dataset_version_id` and `job_id` (the caller has checked it is the reader's).
    A purged version answers with its deletion date; an unfinished job with the rule alone.
    """
    if (dataset_version_id is None) == (job_id is None):
        raise ValueError("give exactly one of dataset_version_id and job_id")
    if dataset_version_id is not None:
        uses = store.retention.version_uses(version_id=dataset_version_id)
        if not uses:
            return []
        use = uses[0]
        policies = store.retention.policies(use.owner_id)
        policy = deciding_policy(policies, use.owner_id, use.dataset_id, "raw_data_days", bounds)
        at = use.purged_at or (None if policy is None or use.in_use else use.last_used_at + timedelta(days=policy.days))
        return [ScheduledDeletion("raw_data", at, "its last use", policy, done=use.purged_at is not None)]
    jobs = store.retention.jobs(job_id=job_id)
    if not jobs:
        return []
    job = jobs[0]
    policies = store.retention.policies(job.owner_id)
    schedule = []
    rules: tuple[tuple[Scheduled, str], ...] = (("checkpoints", "checkpoint_days"), ("job", "job_days"))
    for what, name in rules:
        policy = deciding_policy(policies, job.owner_id, job.dataset_id, name, bounds)
        at = None
        if policy is not None and job.finished and job.finished_at is not None:
            at = job.finished_at + timedelta(days=policy.days)
        schedule.append(ScheduledDeletion(what, at, "it finished", policy))
    return schedule


def _purge_action(policies: Policies, use: VersionUse, bounds: RetentionBounds) -> RetentionAction | None:
    if use.purged_at is not None or use.in_use:
        return None
    policy = deciding_policy(policies, use.owner_id, use.dataset_id, "raw_data_days", bounds)
    if policy is None:
        return None
    return RetentionAction(
        kind="purge_raw_data", owner_id=use.owner_id, target_id=use.version_id, label=use.label,
        due_at=use.last_used_at + timedelta(days=policy.days), policy=policy,
        prefixes=(storage_key_prefix(use.storage_key),),
    )  # fmt: skip


def _job_action(policies: Policies, job: FinishedJob, bounds: RetentionBounds) -> RetentionAction | None:
    policy = deciding_policy(policies, job.owner_id, job.dataset_id, "job_days", bounds)
    if policy is None or not job.finished or job.finished_at is None:
        return None
    return RetentionAction(
        kind="delete_job", owner_id=job.owner_id, target_id=job.job_id, label=f"job {job.name}",
        due_at=job.finished_at + timedelta(days=policy.days), policy=policy,
        prefixes=(job_prefix(job.owner_id, job.job_id),),
    )  # fmt: skip


def _prune_action(policies: Policies, job: FinishedJob, bounds: RetentionBounds) -> RetentionAction | None:
    policy = deciding_policy(policies, job.owner_id, job.dataset_id, "checkpoint_days", bounds)
    if policy is None or not job.finished or job.finished_at is None or not job.checkpoints:
        return None
    newest = max(checkpoint.step for checkpoint in job.checkpoints)
    removed = [c for c in job.checkpoints if not c.is_best and c.step != newest]
    if not removed:
        return None
    return RetentionAction(
        kind="prune_checkpoints", owner_id=job.owner_id, target_id=job.job_id, label=f"job {job.name}",
        due_at=job.finished_at + timedelta(days=policy.days), policy=policy,
        prefixes=tuple(c.storage_prefix for c in removed), checkpoint_steps=tuple(c.step for c in removed),
    )  # fmt: skip
