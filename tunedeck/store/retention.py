"""Retention policies: how long an owner keeps raw data, checkpoints and finished jobs, within the operator's bounds.

An owner has at most one user-wide policy and one per dataset; each of the three
numbers of days is optional. The repository also reads what a retention sweep
needs to know (when each version was last used, which finished jobs keep which
checkpoints) across every owner, and performs the row side of a sweep. What to
delete and when is decided by `tunedeck.service.privacy.retention_plan`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from tunedeck.core.errors import ConfigError, Issue, StateTransitionError
from tunedeck.core.ids import new_id
from tunedeck.core.settings import Settings
from tunedeck.core.states import TERMINAL_STATES
from tunedeck.store.access import Actor, get_owned
from tunedeck.store.checkpoints import COMMITTED
from tunedeck.store.db import Database
from tunedeck.store.models import Checkpoint, Dataset, DatasetVersion, Job, RetentionPolicy, TestSetAccess, User
from tunedeck.store.types import utcnow

POLICY_FIELDS = ("raw_data_days", "checkpoint_days", "job_days")
FINISHED_STATES = tuple(sorted(state.value for state in TERMINAL_STATES))


@dataclass(frozen=True)
class RetentionBounds:
    """The operator's bounds: no owner value below `min_days` or above `max_days` (None: no upper bound).

    With `max_days` set, whatever an owner keeps without a policy is kept that long at most.
    """

    min_days: int = 1
    max_days: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> RetentionBounds:
        """The bounds `TUNEDECK_RETENTION_MIN_DAYS` / `TUNEDECK_RETENTION_MAX_DAYS` set."""
        return cls(min_days=settings.retention_min_days, max_days=settings.retention_max_days)

    def clamp(self, days: int) -> int:
        """`days` within the bounds: a value an owner set under older bounds is read within today's."""
        days = max(days, self.min_days)
        return days if self.max_days is None else min(days, self.max_days)

    def refuse_out_of_bounds(self, changes: Mapping[str, int | None]) -> None:
        """ConfigError naming each field whose value is outside the bounds (None, keep as allowed, is always in)."""
        issues = []
        for name, value in changes.items():
            if value is None:
                continue
            if value < self.min_days:
                issues.append(Issue(
                    f"{value} days is below the shortest retention this server allows ({self.min_days} days)",
                    field=name, expected=f"at least {self.min_days}", found=str(value),
                ))  # fmt: skip
            elif self.max_days is not None and value > self.max_days:
                issues.append(Issue(
                    f"{value} days is above the longest retention this server allows ({self.max_days} days)",
                    field=name, expected=f"at most {self.max_days}", found=str(value),
                ))  # fmt: skip
        if issues:
            raise ConfigError(issues, title="retention out of bounds")


@dataclass(frozen=True)
class PolicyValues:
    """One policy row as set (None: not set), or all None when there is no row."""

    raw_data_days: int | None = None
    checkpoint_days: int | None = None
    job_days: int | None = None
    updated_at: datetime | None = None

    def get(self, name: str) -> int | None:
        """The value of one of POLICY_FIELDS."""
        value: int | None = getattr(self, name)
        return value


@dataclass(frozen=True)
class VersionUse:
    """What a sweep needs to know about one dataset version."""

    version_id: str
    owner_id: str
    dataset_id: str
    dataset_name: str
    version: int
    storage_key: str
    created_at: datetime
    last_used_at: datetime  # the newest of its upload and of every job's use of it
    in_use: bool  # a job that has not finished trains, validates or tests on it
    purged_at: datetime | None

    @property
    def label(self) -> str:
        """`dataset NAME vN`, as messages name it."""
        return f"dataset {self.dataset_name} v{self.version}"


@dataclass(frozen=True)
class CheckpointFacts:
    """One committed checkpoint of a finished job."""

    checkpoint_id: str
    step: int
    storage_prefix: str
    is_best: bool


@dataclass(frozen=True)
class FinishedJob:
    """What a sweep needs to know about one job (finished or not)."""

    job_id: str
    owner_id: str
    name: str
    state: str
    finished_at: datetime | None
    dataset_id: str | None  # the dataset of its training data, whose policy applies too
    checkpoints: tuple[CheckpointFacts, ...]

    @property
    def finished(self) -> bool:
        """Whether the job ended (succeeded, failed or cancelled) and cannot run again on its own."""
        return self.state in FINISHED_STATES and self.finished_at is not None


def purged_message(dataset_name: str, version: int, purged_at: datetime) -> str:
    """Why a purged version cannot be read, trained on or downloaded."""
    return (
        f"the raw data of dataset {dataset_name} v{version} was deleted on {purged_at.date().isoformat()} "
        "by its retention policy; upload it again as a new version to use it"
    )


class RetentionRepository:
    """Read and set retention policies; read and apply what a retention sweep works on."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def user_policy(self, actor: Actor) -> PolicyValues:
        """`actor`'s user-wide policy (all None when never set)."""
        with self.db.read() as session:
            return _values(_user_row(session, actor.id))

    def set_user_policy(self, actor: Actor, changes: Mapping[str, int | None], bounds: RetentionBounds) -> PolicyValues:
        """Set fields of `actor`'s user-wide policy (None: keep as long as allowed); out of bounds is a ConfigError."""
        _check_fields(changes)
        bounds.refuse_out_of_bounds(changes)
        with self.db.write() as session:
            # Locking the user serialises the first write: one user-wide row per owner, on both databases.
            session.get(User, actor.id, with_for_update=True)
            row = _user_row(session, actor.id)
            if row is None:
                row = RetentionPolicy(id=new_id("ret_"), owner_id=actor.id, dataset_id=None)
                session.add(row)
            return _apply(row, changes)

    def dataset_policy(self, actor: Actor, dataset_id: str) -> PolicyValues:
        """The policy of one of `actor`'s datasets; NotFoundError when it is not theirs."""
        with self.db.read() as session:
            get_owned(session, Dataset, dataset_id, actor, "dataset")
            return _values(_dataset_row(session, dataset_id))

    def set_dataset_policy(
        self, actor: Actor, dataset_id: str, changes: Mapping[str, int | None], bounds: RetentionBounds
    ) -> PolicyValues:
        """Set fields of the policy of one of `actor`'s datasets (NotFoundError when not theirs)."""
        _check_fields(changes)
        bounds.refuse_out_of_bounds(changes)
        with self.db.write() as session:
            dataset = get_owned(session, Dataset, dataset_id, actor, "dataset", for_update=True)
            row = _dataset_row(session, dataset.id)
            if row is None:
                row = RetentionPolicy(id=new_id("ret_"), owner_id=dataset.owner_id, dataset_id=dataset.id)
                session.add(row)
            return _apply(row, changes)

    def policies(self, owner_id: str | None = None) -> dict[tuple[str, str | None], PolicyValues]:
        """Every policy (of one owner, or everyone's) keyed by (owner id, dataset id or None)."""
        with self.db.read() as session:
            statement = select(RetentionPolicy)
            if owner_id is not None:
                statement = statement.where(RetentionPolicy.owner_id == owner_id)
            return {(row.owner_id, row.dataset_id): _values(row) for row in session.scalars(statement)}

    def version_uses(self, owner_id: str | None = None, *, version_id: str | None = None) -> list[VersionUse]:
        """Every dataset version (of one owner, or one version) with its last use, oldest first."""
        with self.db.read() as session:
            statement = select(DatasetVersion, Dataset.name).join(Dataset, Dataset.id == DatasetVersion.dataset_id)
            if owner_id is not None:
                statement = statement.where(DatasetVersion.owner_id == owner_id)
            if version_id is not None:
                statement = statement.where(DatasetVersion.id == version_id)
            found = session.execute(statement.order_by(DatasetVersion.id)).all()
            ids = [version.id for version, _ in found]
            job_uses = _job_uses(session, ids)
            test_uses = _test_set_uses(session, ids)
            uses = []
            for version, dataset_name in found:
                used = [
                    version.created_at,
                    *(time for time, _ in job_uses.get(version.id, [])),
                    *test_uses.get(version.id, []),
                ]
                uses.append(VersionUse(
                    version_id=version.id, owner_id=version.owner_id, dataset_id=version.dataset_id,
                    dataset_name=dataset_name, version=version.version, storage_key=version.storage_key,
                    created_at=version.created_at, last_used_at=max(used),
                    in_use=any(state not in FINISHED_STATES for _, state in job_uses.get(version.id, [])),
                    purged_at=version.purged_at,
                ))  # fmt: skip
            return uses

    def jobs(self, owner_id: str | None = None, *, job_id: str | None = None) -> list[FinishedJob]:
        """Every job (of one owner, or one job) with its training dataset and committed checkpoints."""
        with self.db.read() as session:
            statement = select(Job, DatasetVersion.dataset_id).outerjoin(
                DatasetVersion, DatasetVersion.id == Job.train_dataset_version_id
            )
            if owner_id is not None:
                statement = statement.where(Job.owner_id == owner_id)
            if job_id is not None:
                statement = statement.where(Job.id == job_id)
            found = session.execute(statement.order_by(Job.id)).all()
            checkpoints = _committed_checkpoints(session, [job.id for job, _ in found])
            return [
                FinishedJob(
                    job_id=job.id,
                    owner_id=job.owner_id,
                    name=job.name,
                    state=job.state,
                    finished_at=job.finished_at,
                    dataset_id=dataset_id,
                    checkpoints=tuple(checkpoints.get(job.id, [])),
                )
                for job, dataset_id in found
            ]

    def mark_purged(self, version_id: str, when: datetime) -> bool:
        """Record that a version's raw data was deleted at `when`; False when it already was or is gone.

        StateTransitionError when a job that has not finished uses it now: its data is not deleted under it.
        """
        with self.db.write() as session:
            version = session.get(DatasetVersion, version_id, with_for_update=True)
            if version is None or version.purged_at is not None:
                return False
            if any(state not in FINISHED_STATES for _, state in _job_uses(session, [version_id]).get(version_id, [])):
                raise StateTransitionError(f"dataset version {version_id!r} is used by a job that has not finished")
            version.purged_at = when
            return True

    def delete_checkpoints(self, job_id: str, steps: list[int]) -> list[Checkpoint]:
        """Delete the committed checkpoint rows of a finished job at `steps`, never its best; the rows removed.

        Rows go first, so a crash before their files are deleted leaves unreferenced files, never a
        row pointing at nothing. A job that is no longer finished (resumed since) keeps everything.
        """
        with self.db.write() as session:
            job = session.get(Job, job_id, with_for_update=True)
            if job is None or job.state not in FINISHED_STATES:
                return []
            rows = list(session.scalars(select(Checkpoint).where(
                Checkpoint.job_id == job_id, Checkpoint.step.in_(steps), Checkpoint.state == COMMITTED,
                Checkpoint.is_best.is_(False),
            )))  # fmt: skip
            for row in rows:
                session.delete(row)
            return rows


def _check_fields(changes: Mapping[str, Any]) -> None:
    unknown = set(changes) - set(POLICY_FIELDS)
    if unknown:
        raise ValueError(f"unknown retention fields {sorted(unknown)}; expected some of {list(POLICY_FIELDS)}")


def _apply(row: RetentionPolicy, changes: Mapping[str, int | None]) -> PolicyValues:
    for name, value in changes.items():
        setattr(row, name, value)
    row.updated_at = utcnow()
    return _values(row)


def _values(row: RetentionPolicy | None) -> PolicyValues:
    if row is None:
        return PolicyValues()
    return PolicyValues(
        raw_data_days=row.raw_data_days,
        checkpoint_days=row.checkpoint_days,
        job_days=row.job_days,
        updated_at=row.updated_at,
    )


def _user_row(session: Session, owner_id: str) -> RetentionPolicy | None:
    statement = select(RetentionPolicy).where(
        RetentionPolicy.owner_id == owner_id, RetentionPolicy.dataset_id.is_(None)
    )
    return session.scalars(statement.order_by(RetentionPolicy.id).limit(1)).first()


def _dataset_row(session: Session, dataset_id: str) -> RetentionPolicy | None:
    return session.scalar(select(RetentionPolicy).where(RetentionPolicy.dataset_id == dataset_id))


def _job_uses(session: Session, version_ids: list[str]) -> dict[str, list[tuple[datetime, str]]]:
    """(created_at, state) of every job training or validating on each version."""
    if not version_ids:
        return {}
    statement = select(
        Job.created_at, Job.state, Job.train_dataset_version_id, Job.validation_dataset_version_id
    ).where(or_(Job.train_dataset_version_id.in_(version_ids), Job.validation_dataset_version_id.in_(version_ids)))
    wanted = set(version_ids)
    uses: dict[str, list[tuple[datetime, str]]] = {}
    for created_at, state, train_id, validation_id in session.execute(statement):
        # A job that trains and validates on one version uses it once.
        for version_id in {v for v in (train_id, validation_id) if v is not None and v in wanted}:
            uses.setdefault(version_id, []).append((created_at, state))
    return uses


def _test_set_uses(session: Session, version_ids: list[str]) -> dict[str, list[datetime]]:
    """The newest read of each sealed test set (its final evaluations)."""
    if not version_ids:
        return {}
    statement = (
        select(TestSetAccess.dataset_version_id, func.max(TestSetAccess.time))
        .where(TestSetAccess.dataset_version_id.in_(version_ids))
        .group_by(TestSetAccess.dataset_version_id)
    )
    return {version_id: [time] for version_id, time in session.execute(statement)}


def _committed_checkpoints(session: Session, job_ids: list[str]) -> dict[str, list[CheckpointFacts]]:
    if not job_ids:
        return {}
    statement = (
        select(Checkpoint)
        .where(Checkpoint.job_id.in_(job_ids), Checkpoint.state == COMMITTED)
        .order_by(Checkpoint.job_id, Checkpoint.step)
    )
    found: dict[str, list[CheckpointFacts]] = {}
    for row in session.scalars(statement):
        found.setdefault(row.job_id, []).append(CheckpointFacts(row.id, row.step, row.storage_prefix, row.is_best))
    return found
