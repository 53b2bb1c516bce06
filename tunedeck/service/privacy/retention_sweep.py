"""Carry out a retention plan: delete what its actions name, and say what was removed, as a receipt.

Each action is done again from the rows as they are now, so applying a plan twice,
or after its owner changed something, removes nothing that should stay: a version a
job uses again is not purged, a resumed job keeps its checkpoints, a running job is
never deleted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tunedeck.core.errors import NotFoundError, StateTransitionError
from tunedeck.core.states import JobState
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.service.privacy.retention_plan import RetentionAction
from tunedeck.storage.base import ArtifactStore
from tunedeck.store.store import JobStore

REASON = "retention"

# One line of a receipt: where something was removed, what, how many objects or rows.
SweepRecord = dict[str, Any]


def apply_retention(
    store: JobStore, artifacts: ArtifactStore, actions: list[RetentionAction], *, now: datetime
) -> list[SweepRecord]:
    """Do every action of a plan made for `now`; the records of what was removed (`where`, `what`, `count`).

    Each action leaves a deletion receipt for its owner (reason `retention`): purges and
    prunes are done here and their receipt is kept done; a whole job goes through the
    deletion work item, which reaches its worker folders and caches too.
    """
    records: list[SweepRecord] = []
    for action in actions:
        if action.kind == "purge_raw_data":
            done = _purge_raw_data(store, artifacts, action, now)
            kind = "dataset_version"
        elif action.kind == "prune_checkpoints":
            done = _prune_checkpoints(store, artifacts, action)
            kind = "job"
        else:
            records += _delete_job(store, action)
            continue
        if done:
            store.deletions.keep_done(action.owner_id, kind, action.target_id, action.label, REASON, done)
        records += done
    return records


def _purge_raw_data(
    store: JobStore, artifacts: ArtifactStore, action: RetentionAction, now: datetime
) -> list[SweepRecord]:
    """Delete a version's stored rows and mark it purged (the mark first: no job may start on it meanwhile)."""
    try:
        marked = store.retention.mark_purged(action.target_id, now)
    except StateTransitionError:
        return []  # a job uses it again since the plan was made: not due any more
    records = [_record("storage", f"raw data of {action.label} ({prefix})", artifacts.delete_prefix(prefix))
               for prefix in action.prefixes]  # fmt: skip
    if marked:
        records.append(_record("database", f"{action.label} marked purged", 1))
    return records


def _prune_checkpoints(store: JobStore, artifacts: ArtifactStore, action: RetentionAction) -> list[SweepRecord]:
    """Delete the checkpoint rows the action names (still committed, never the best), then their files."""
    removed = store.retention.delete_checkpoints(action.target_id, list(action.checkpoint_steps))
    records = []
    if removed:
        steps = ", ".join(str(row.step) for row in removed)
        records.append(_record("database", f"checkpoint rows of {action.label} (steps {steps})", len(removed)))
    for row in removed:
        count = artifacts.delete_prefix(row.storage_prefix)
        records.append(_record("storage", f"checkpoint {row.step} of {action.label} ({row.storage_prefix})", count))
    return records


def _delete_job(store: JobStore, action: RetentionAction) -> list[SweepRecord]:
    """Delete a finished job as its owner would: rows now, every other copy by the deletion work item."""
    try:
        owner = store.users.get_user(action.owner_id)
        job = store.jobs.get(owner, action.target_id)
        if not JobState(job.state).is_terminal:
            return []  # resumed since the plan was made
        receipt = request_deletion(store, owner, "job", job.id, reason=REASON)
    except (NotFoundError, StateTransitionError):
        return []  # gone already, or busy again since the plan was made
    return [dict(line) for line in receipt.removed] + [
        _record("deletion", f"every other copy of {action.label} (receipt {receipt.id})", 1)
    ]


def _record(where: str, what: str, count: int) -> SweepRecord:
    return {"where": where, "what": what, "count": count}
