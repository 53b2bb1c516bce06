"""A worker's hygiene sweep: its local run folders and work scratch folders go once nothing needs them.

- `<runs_dir>/<job_id>/` of a finished job (succeeded, failed, cancelled) goes once every
  checkpoint of the job is committed (a `written` row means the local copy may be the only
  one: the folder stays) and the job ended more than `keep_run_hours` ago. A succeeded job's
  final model is committed before the job is marked succeeded, so its state says so.
- The folder of a job that no longer exists goes at once.
- A paused or queued job's attempt folders go too, `keep_run_hours` after the attempt ended: a
  resumed attempt always starts in a new `attempt-N` folder and downloads its checkpoint from
  storage, never from an old folder.
  Only the attempts the database already counted are removed, so an attempt that another
  worker on this machine claims meanwhile keeps its new folder.
- `<runs_dir>/work/<kind>-<item_id>-*` scratch folders go unless the item is running (on
  this worker, or on another one sharing the machine); scratch folders naming no item (a
  killed worker's probe) go once untouched for an hour.
- A running job's folder is never touched, nor one this worker is running (a job whose
  state is already written but whose thread still uploads).

The clock is passed in, so a test decides what is old. Nothing here decides *when* to sweep:
the supervisor sweeps periodically and right after a job ends; `tunedeck sweep` on demand.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from tunedeck.core.leftovers import (
    UPLOAD_LEFTOVER_AGE_S,
    SweepReport,
    older_than,
    remove_leftover,
    sweep_upload_leftovers,
)
from tunedeck.core.states import TERMINAL_STATES, JobState
from tunedeck.store.deletions import removal
from tunedeck.store.local_folders import JobFolderFacts
from tunedeck.store.store import JobStore
from tunedeck.worker.context import WorkerContext

__all__ = [
    "SweepReport",
    "WorkerFolders",
    "sweep_upload_leftovers",
    "sweep_worker_folders",
    "work_scratch_prefix",
]

JOB_FOLDER = re.compile(r"^job_[0-9A-Za-z]+$")
ATTEMPT_FOLDER = re.compile(r"^attempt-([0-9]+)$")
WORK_FOLDER = re.compile(r"^[a-z_]+-(wi_[0-9A-Za-z]+)-")
WORK_DIR = "work"
# Jobs waiting between attempts: a resume downloads its checkpoint into a new attempt folder.
_IDLE_STATES = frozenset({JobState.QUEUED, JobState.PAUSED})


@dataclass(frozen=True)
class WorkerFolders:
    """Where a worker keeps its folders, the store that knows their jobs, and what the worker runs now."""

    runs_dir: Path
    store: JobStore
    running_jobs: frozenset[str] = frozenset()
    running_work: frozenset[str] = frozenset()
    # How a deletion receipt names this place when the sweep removes a deleted job's copy.
    worker_id: str = "this machine"

    @classmethod
    def of(
        cls, ctx: WorkerContext, running_jobs: Collection[str] = (), running_work: Collection[str] = ()
    ) -> WorkerFolders:
        """A running worker's folders."""
        return cls(ctx.runs_dir, ctx.store, frozenset(running_jobs), frozenset(running_work), ctx.worker_id)


def work_scratch_prefix(kind: str, item_id: str) -> str:
    """The name prefix of a work item's scratch folder: the sweep reads the item id back from it."""
    return f"{kind}-{item_id}-"


def sweep_worker_folders(
    folders: WorkerFolders | WorkerContext, *, now: datetime, keep_run_hours: float, dry_run: bool = False
) -> SweepReport:
    """Remove the run and work scratch folders no job or work item needs any more (see the module's rules).

    A bare `WorkerContext` stands for a worker running nothing (the CLI's view of this machine).
    """
    place = folders if isinstance(folders, WorkerFolders) else WorkerFolders.of(folders)
    report = SweepReport(dry_run=dry_run)
    if not place.runs_dir.is_dir():
        return report
    _sweep_runs(place, now, timedelta(hours=max(0.0, keep_run_hours)), report)
    _sweep_work(place, now, report)
    return report


def _sweep_runs(place: WorkerFolders, now: datetime, keep: timedelta, report: SweepReport) -> None:
    candidates = {
        path.name: path
        for path in place.runs_dir.iterdir()
        if JOB_FOLDER.match(path.name) and path.is_dir() and not path.is_symlink()
        and path.name not in place.running_jobs
    }  # fmt: skip
    if not candidates:
        return
    facts = place.store.local_folders.job_facts(candidates)
    for job_id, path in sorted(candidates.items()):
        fact = facts.get(job_id)
        if fact is None:
            _remove_deleted_job_folder(place, job_id, path, report)
        elif fact.state in TERMINAL_STATES:
            if not fact.uncommitted_checkpoints and fact.ended_at + keep <= now:
                remove_leftover(report, "runs", path)
        elif fact.state in _IDLE_STATES and not fact.uncommitted_checkpoints and fact.ended_at + keep <= now:
            for attempt in _counted_attempts(path, fact):
                remove_leftover(report, "runs", attempt)


def _remove_deleted_job_folder(place: WorkerFolders, job_id: str, path: Path, report: SweepReport) -> None:
    """Remove the copy a deleted job left here, and add it to its deletion's receipt while that is open."""
    before = len(report.removed)
    remove_leftover(report, "runs", path)
    if report.dry_run or len(report.removed) == before:
        return
    receipt_id = place.store.deletions.open_receipt_for_job(job_id)
    if receipt_id is not None:
        size = int(report.removed[-1]["bytes"])
        place.store.deletions.add_removed(receipt_id, [removal(f"worker {place.worker_id}", f"runs/{job_id}", 1, size)])


def _counted_attempts(job_folder: Path, fact: JobFolderFacts) -> list[Path]:
    """The attempt folders of attempts the database has counted (a newer one may be starting right now)."""
    counted = []
    for path in sorted(job_folder.iterdir()):
        found = ATTEMPT_FOLDER.match(path.name)
        if found is not None and int(found.group(1)) <= fact.attempt:
            counted.append(path)
    return counted


def _sweep_work(place: WorkerFolders, now: datetime, report: SweepReport) -> None:
    work_dir = place.runs_dir / WORK_DIR
    if not work_dir.is_dir():
        return
    named: dict[Path, str] = {}
    for path in sorted(work_dir.iterdir()):
        found = WORK_FOLDER.match(path.name)
        if found is None:
            # A probe or scratch naming no item: only a killed worker leaves one untouched for long.
            if older_than(path, now, UPLOAD_LEFTOVER_AGE_S):
                remove_leftover(report, "work", path)
        elif found.group(1) not in place.running_work:
            named[path] = found.group(1)
    running_elsewhere = place.store.local_folders.running_items(named.values()) if named else set()
    for path, item_id in named.items():
        if item_id not in running_elsewhere:
            remove_leftover(report, "work", path)
