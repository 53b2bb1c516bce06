"""Deletions: the rows go at once with a receipt and a `delete` work item, in one transaction; receipts are read back.

What a deletion reaches is decided by `tunedeck.service.privacy.deletion_plan`; this module only
carries it out in the database. The worker that runs the `delete` item removes every
other copy and appends each removal to the receipt (`add_removed`), merging by place and
key, so a retried item never lists anything twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Text, cast, delete, func, or_, select
from sqlalchemy.orm import Session

from tunedeck.core.errors import NotFoundError, StateTransitionError
from tunedeck.core.ids import new_id
from tunedeck.core.states import WorkKind
from tunedeck.store.access import Actor
from tunedeck.store.db import Database
from tunedeck.store.jobs import ACTIVE_STATES
from tunedeck.store.models import (
    ApiToken,
    BaseModelRecord,
    Checkpoint,
    Dataset,
    DatasetVersion,
    DeletionReceipt,
    Experiment,
    FineTuningRequest,
    Job,
    JobEvent,
    Metric,
    Quota,
    RentalPlan,
    User,
    WebSession,
    WorkItem,
)
from tunedeck.store.types import utcnow
from tunedeck.store.work_items import new_work_item

TARGET_KINDS = ("dataset", "dataset_version", "job", "export", "user")
PENDING, DONE, FAILED = "pending", "done", "failed"
DATABASE = "database"
_OPEN_ITEM_STATES = ("queued", "running")


@dataclass(frozen=True)
class RowsToDelete:
    """The rows a deletion removes (their dependants go with them through the foreign keys)."""

    user_id: str | None = None
    dataset_ids: tuple[str, ...] = ()
    version_ids: tuple[str, ...] = ()
    job_ids: tuple[str, ...] = ()
    # Work items whose result is what is deleted (an export): removed so an identical request builds it again.
    work_item_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeletionOrder:
    """One deletion as planned: its target, the rows to remove now and what the worker removes afterwards."""

    target_kind: str
    target_id: str
    target_label: str
    rows: RowsToDelete
    worker_inputs: dict[str, Any] = field(default_factory=dict)
    reason: str = "request"


def removal(where: str, what: str, count: int, size: int = 0) -> dict[str, Any]:
    """One line of a receipt: `count` things (`size` bytes) removed from `what` in `where`."""
    return {"where": where, "what": what, "count": int(count), "bytes": int(size)}


def merge_removals(lines: Sequence[dict[str, Any]], more: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`lines` with `more` added; a line for the same place and key adds to the one already there."""
    merged = [dict(line) for line in lines]
    index = {(line["where"], line["what"]): line for line in merged}
    for line in more:
        existing = index.get((line["where"], line["what"]))
        if existing is None:
            existing = index[(line["where"], line["what"])] = dict(line)
            merged.append(existing)
        else:
            existing["count"] += int(line["count"])
            existing["bytes"] += int(line["bytes"])
    return merged


class DeletionRepository:
    """Carry out a planned deletion in the database; read, extend and close its receipt."""

    def __init__(self, db: Database, *, default_max_attempts: int = 3) -> None:
        self.db = db
        self.default_max_attempts = default_max_attempts

    def record(self, actor: Actor, order: DeletionOrder) -> DeletionReceipt:
        """Remove the order's rows, write its `pending` receipt and queue its `delete` item, all or nothing.

        StateTransitionError (nothing removed) when one of the jobs is running, or when a job
        trained on a version being deleted appeared since the order was planned.
        """
        if order.target_kind not in TARGET_KINDS:
            raise ValueError(f"unknown deletion target {order.target_kind!r}; expected one of {TARGET_KINDS}")
        receipt_id = new_id("del_")
        with self.db.write() as session:
            removed = _delete_rows(session, order.rows)
            item = new_work_item(
                actor.id, WorkKind.DELETE.value, {**order.worker_inputs, "receipt_id": receipt_id},
                self.default_max_attempts,
            )  # fmt: skip
            receipt = DeletionReceipt(
                id=receipt_id,
                owner_id=actor.id,
                target_kind=order.target_kind,
                target_id=order.target_id,
                target_label=order.target_label[:300],
                reason=order.reason,
                state=PENDING,
                requested_at=utcnow(),
                work_item_id=item.id,
                removed=removed,
            )
            session.add(item)
            session.add(receipt)
        return receipt

    def get(self, actor: Actor, receipt_id: str) -> DeletionReceipt:
        """One of `actor`'s receipts; NotFoundError for another user's (an admin's too: receipts are the asker's)."""
        with self.db.read() as session:
            receipt = session.get(DeletionReceipt, receipt_id)
        if receipt is None or receipt.owner_id != actor.id:
            raise NotFoundError(f"deletion {receipt_id!r} not found")
        return receipt

    def list_receipts(self, actor: Actor, *, limit: int = 100) -> list[DeletionReceipt]:
        """`actor`'s receipts, newest first."""
        statement = (
            select(DeletionReceipt)
            .where(DeletionReceipt.owner_id == actor.id)
            .order_by(DeletionReceipt.id.desc())
            .limit(max(1, min(limit, 500)))
        )
        with self.db.read() as session:
            return list(session.scalars(statement))

    # The worker's side: receipts are addressed by id (the item's inputs name it).

    def receipt(self, receipt_id: str) -> DeletionReceipt:
        """A receipt by id, whoever asked; NotFoundError when absent."""
        with self.db.read() as session:
            receipt = session.get(DeletionReceipt, receipt_id)
        if receipt is None:
            raise NotFoundError(f"deletion {receipt_id!r} not found")
        return receipt

    def add_removed(self, receipt_id: str, lines: Iterable[dict[str, Any]]) -> DeletionReceipt:
        """Append removals to the receipt (merged by place and key)."""
        with self.db.write() as session:
            receipt = session.get(DeletionReceipt, receipt_id, with_for_update=True)
            if receipt is None:
                raise NotFoundError(f"deletion {receipt_id!r} not found")
            receipt.removed = merge_removals(receipt.removed or [], lines)
            return receipt

    def keep_done(
        self, owner_id: str, target_kind: str, target_id: str, label: str, reason: str, removed: list[dict[str, Any]]
    ) -> DeletionReceipt:
        """Keep the receipt of a removal already done in place (a retention sweep's purge or prune)."""
        if target_kind not in TARGET_KINDS:
            raise ValueError(f"unknown deletion target {target_kind!r}; expected one of {TARGET_KINDS}")
        now = utcnow()
        receipt = DeletionReceipt(
            id=new_id("del_"), owner_id=owner_id, target_kind=target_kind, target_id=target_id,
            target_label=label[:300], reason=reason, state=DONE, requested_at=now, finished_at=now,
            removed=merge_removals([], (removal(line["where"], line["what"], line["count"], line.get("bytes", 0))
                                        for line in removed)),
        )  # fmt: skip
        with self.db.write() as session:
            session.add(receipt)
        return receipt

    def finish(self, receipt_id: str, state: str = DONE) -> DeletionReceipt:
        """Mark the receipt `done` (or `failed`) now."""
        if state not in (DONE, FAILED):
            raise ValueError(f"a deletion ends {DONE} or {FAILED}, not {state!r}")
        with self.db.write() as session:
            receipt = session.get(DeletionReceipt, receipt_id, with_for_update=True)
            if receipt is None:
                raise NotFoundError(f"deletion {receipt_id!r} not found")
            receipt.state = state
            receipt.finished_at = utcnow()
            return receipt

    def open_receipt_for_job(self, job_id: str) -> str | None:
        """The receipt of a deletion still under way that reaches this (deleted) job's folders, if any.

        Matched on the text of the deletion items' inputs, which list the job ids to reach:
        the same query on SQLite and PostgreSQL, and ids are never a prefix of one another.
        """
        statement = (
            select(WorkItem.inputs)
            .where(WorkItem.kind == WorkKind.DELETE.value, WorkItem.state.in_(_OPEN_ITEM_STATES))
            .where(cast(WorkItem.inputs, Text).like(f'%"{job_id}"%'))
            .order_by(WorkItem.id)
        )
        with self.db.read() as session:
            for inputs in session.scalars(statement):
                if job_id in (inputs.get("job_ids") or []):
                    return str(inputs["receipt_id"])
        return None

    def jobs_trained_on(self, version_ids: Sequence[str]) -> list[Job]:
        """Jobs whose training or validation data is one of these versions, oldest first."""
        if not version_ids:
            return []
        statement = select(Job).where(
            or_(Job.train_dataset_version_id.in_(version_ids), Job.validation_dataset_version_id.in_(version_ids))
        )
        with self.db.read() as session:
            return list(session.scalars(statement.order_by(Job.id)))

    def owned_by(self, user_id: str) -> tuple[list[Job], list[DatasetVersion]]:
        """Every job and dataset version of one user (what deleting the user reaches beyond its storage folder)."""
        with self.db.read() as session:
            jobs = list(session.scalars(select(Job).where(Job.owner_id == user_id).order_by(Job.id)))
            statement = select(DatasetVersion).where(DatasetVersion.owner_id == user_id)
            versions = list(session.scalars(statement.order_by(DatasetVersion.id)))
        return jobs, versions

    def hashes_in_use(self, sha256s: Iterable[str]) -> set[str]:
        """Which of these content hashes a remaining dataset version (of any user) still has."""
        wanted = sorted(set(sha256s))
        if not wanted:
            return set()
        with self.db.read() as session:
            return set(session.scalars(select(DatasetVersion.sha256).where(DatasetVersion.sha256.in_(wanted))))


def _count(session: Session, model: type[Any], condition: Any) -> int:
    return int(session.scalar(select(func.count()).select_from(model).where(condition)) or 0)


def _delete(session: Session, model: type[Any], condition: Any) -> int:
    """Delete the matching rows; how many there were (counted first: drivers' row counts differ)."""
    count = _count(session, model, condition)
    if count:
        session.execute(delete(model).where(condition))
    return count


def _delete_rows(session: Session, rows: RowsToDelete) -> list[dict[str, Any]]:
    """Remove `rows` (after checking no job is busy); the receipt's database lines, one per table touched."""
    job_ids = list(rows.job_ids)
    if rows.user_id is not None:
        job_ids += list(session.scalars(select(Job.id).where(Job.owner_id == rows.user_id)))
    active = [state.value for state in ACTIVE_STATES]
    busy = session.scalars(select(Job).where(Job.id.in_(job_ids), Job.state.in_(active))).all()
    if busy:
        named = ", ".join(f"{job.id} ({job.name}, {job.state})" for job in busy)
        # A worker may be writing their files: never delete from under it.
        raise StateTransitionError(f"cancel these jobs before deleting them: {named}")
    if rows.version_ids:
        trained = session.scalars(
            select(Job).where(
                or_(Job.train_dataset_version_id.in_(rows.version_ids),
                    Job.validation_dataset_version_id.in_(rows.version_ids)),
                Job.id.not_in(job_ids),
            )
        ).all()  # fmt: skip
        if trained:
            named = ", ".join(f"{job.id} ({job.name})" for job in trained)
            raise StateTransitionError(f"these jobs were trained on the data being deleted: {named}; ask again")
    counted: list[tuple[str, int]] = []
    if job_ids:
        in_jobs = list(job_ids)
        counted += [
            ("job events", _count(session, JobEvent, JobEvent.job_id.in_(in_jobs))),
            ("metrics", _count(session, Metric, Metric.job_id.in_(in_jobs))),
            ("checkpoints", _count(session, Checkpoint, Checkpoint.job_id.in_(in_jobs))),
            ("work items", _count(session, WorkItem, WorkItem.job_id.in_(in_jobs))),
            ("fine-tuning requests", _count(session, FineTuningRequest, FineTuningRequest.job_id.in_(in_jobs))),
        ]
        # Work items that name the job only in their inputs (exports, generations) keep no copy worth keeping.
        counted.append(("jobs", _delete(session, Job, Job.id.in_(in_jobs))))
    if rows.work_item_ids:
        counted.append(("work items", _delete(session, WorkItem, WorkItem.id.in_(rows.work_item_ids))))
    if rows.version_ids:
        counted.append(
            ("dataset versions",
             _delete(session, DatasetVersion, DatasetVersion.id.in_(rows.version_ids)))
        )  # fmt: skip
    if rows.dataset_ids:
        counted.append(("datasets", _delete(session, Dataset, Dataset.id.in_(rows.dataset_ids))))
    if rows.user_id is not None:
        counted += _delete_user(session, rows.user_id)
    return merge_removals([], (removal(DATABASE, what, n) for what, n in counted if n))


def _delete_user(session: Session, user_id: str) -> list[tuple[str, int]]:
    """Remove a user row; everything they own goes with it through the foreign keys (counted first)."""
    owned: list[tuple[str, type[Any], Any]] = [
        ("dataset versions", DatasetVersion, DatasetVersion.owner_id),
        ("datasets", Dataset, Dataset.owner_id),
        ("base models", BaseModelRecord, BaseModelRecord.owner_id),
        ("experiments", Experiment, Experiment.owner_id),
        ("rental plans", RentalPlan, RentalPlan.owner_id),
        ("work items", WorkItem, WorkItem.owner_id),
        ("api tokens", ApiToken, ApiToken.user_id),
        ("web sessions", WebSession, WebSession.user_id),
        ("deletion receipts", DeletionReceipt, DeletionReceipt.owner_id),
    ]
    counted = [(what, _count(session, model, column == user_id)) for what, model, column in owned]
    # The quota row names the user without a foreign key.
    counted.append(("quotas", _delete(session, Quota, Quota.subject == user_id)))
    if _delete(session, User, User.id == user_id):
        counted.append(("users", 1))
    return counted
