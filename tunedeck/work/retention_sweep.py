"""Carry out a retention plan: delete what its actions name, and say what was removed, as a receipt.

Each action is done again from the rows as they are now, so applying a plan twice,
or after its owner changed something, removes nothing that should stay: a version a
job uses again is not purged, a resumed job keeps its checkpoints, a running job is
never deleted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tunedeck.core.errors import StateTransitionError
from tunedeck.jobs.store import JobStore
from tunedeck.storage.base import ArtifactStore, job_prefix
from tunedeck.work.retention_plan import RetentionAction

# One line of a receipt: where something was removed, what, how many objects or rows.
SweepRecord = dict[str, Any]


def apply_retention(
    store: JobStore, artifacts: ArtifactStore, actions: list[RetentionAction], *, now: datetime
) -> list[SweepRecord]:
    """Do every action of a plan made for `now`; the records of what was removed (`where`, `what`, `count`)."""
    records: list[SweepRecord] = []
    for action in actions:
        if action.kind == "purge_raw_data":
            records += _purge_raw_data(store, artifacts, action, now)
        elif action.kind == "prune_checkpoints":
            records += _prune_checkpoints(store, artifacts, action)
        else:
            records += _delete_job(store, artifacts, action)
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


def _delete_job(store: JobStore, artifacts: ArtifactStore, action: RetentionAction) -> list[SweepRecord]:
    """Delete a finished job: its rows, then its storage folder.

    Deleting every copy (worker folders, caches too) is the deletion work item's job;
    until it is wired here, this removes what the API's job deletion removes.
    """
    job = store.retention.delete_finished_job(action.target_id)
    if job is None:
        return []  # gone already, or resumed since the plan was made
    prefix = job_prefix(job.owner_id, job.id)
    return [
        _record("database", f"{action.label} ({job.id}) with its events, metrics and checkpoints", 1),
        _record("storage", f"files of {action.label} ({prefix})", artifacts.delete_prefix(prefix)),
    ]


def _record(where: str, what: str, count: int) -> SweepRecord:
    return {"where": where, "what": what, "count": count}
