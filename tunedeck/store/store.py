"""`JobStore`: one object giving the worker and the API every repository over one database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import select

from tunedeck.core.states import WorkKind
from tunedeck.store.access_log import AccessLogRepository
from tunedeck.store.base_models import BaseModelRepository
from tunedeck.store.checkpoints import CheckpointRepository
from tunedeck.store.datasets import DatasetRepository
from tunedeck.store.db import Database, upgrade_database
from tunedeck.store.deletions import DeletionRepository
from tunedeck.store.experiments import ExperimentRepository
from tunedeck.store.fine_tuning_requests import FineTuningRequestRepository
from tunedeck.store.job_summaries import JobSummaryQueries
from tunedeck.store.jobs import JobRepository
from tunedeck.store.key_checks import KeyCheckRepository
from tunedeck.store.kind_policy import ItemPolicy
from tunedeck.store.local_folders import LocalFolderQueries
from tunedeck.store.models import User
from tunedeck.store.quotas import QuotaRepository
from tunedeck.store.rental_plans import RentalPlanRepository
from tunedeck.store.retention import RetentionRepository
from tunedeck.store.telemetry import TelemetryRepository
from tunedeck.store.train_policy import TrainPolicy
from tunedeck.store.users import UserRepository
from tunedeck.store.web_sessions import WebSessionRepository
from tunedeck.store.work_items import WorkItemRepository
from tunedeck.store.work_queue import WorkQueue

# Its rows are gone already: stopping halfway would only leave copies nobody can reach.
DELETE_CANNOT_CANCEL = "work item {item_id!r} removes what a deletion left behind: it cannot be cancelled"


class JobStore:
    """The SQL store and queue, identical on SQLite and PostgreSQL.

    `users`, `datasets`, `base_models`, `experiments`, `jobs` (person-facing,
    owner-scoped), `work` (requests of work as people submit and read them: jobs' training,
    exports, preflights, inspections, generations, ingestions, deletions), `queue` (the one
    work queue over them: claim, heartbeat, finish, release, cancel, lease expiry;
    worker-facing, fencing-token-scoped), `checkpoints`, `telemetry`, `quotas`
    (per-user limits), `deletions` (receipts of what deleting
    removed), `retention` (owners' retention policies), `access_log` (reads of users' raw
    data), `fine_tuning_requests` (what jobs created under `/v1` were asked with),
    `plans` (rentals planned around an experiment's phases),
    `local_folders` (what a worker's folder sweep asks) and `key_checks` (the encryption keys'
    check values). Close it when done (`close()` or a `with` block).
    """

    def __init__(self, db: Database, *, default_max_attempts: int = 3) -> None:
        self.db = db
        self.users = UserRepository(db)
        self.datasets = DatasetRepository(db)
        self.base_models = BaseModelRepository(db)
        self.experiments = ExperimentRepository(db)
        self.quotas = QuotaRepository(db)
        self.jobs = JobRepository(db, self.quotas, default_max_attempts=default_max_attempts)
        self.work = WorkItemRepository(db, default_max_attempts=default_max_attempts)
        self.queue = registered_work_queue(db, self.quotas)
        self.checkpoints = CheckpointRepository(db)
        self.telemetry = TelemetryRepository(db)
        self.summaries = JobSummaryQueries(db)
        self.sessions = WebSessionRepository(db)
        self.access_log = AccessLogRepository(db)
        self.local_folders = LocalFolderQueries(db)
        self.retention = RetentionRepository(db)
        self.fine_tuning_requests = FineTuningRequestRepository(db)
        self.plans = RentalPlanRepository(db)
        self.deletions = DeletionRepository(db, default_max_attempts=default_max_attempts)
        self.key_checks = KeyCheckRepository(db)

    @classmethod
    def open(cls, url: str, *, migrate: bool = True, default_max_attempts: int = 3) -> JobStore:
        """Connect to `url`, first bringing its schema up to date unless `migrate` is False."""
        if migrate:
            upgrade_database(url)
        return cls(Database.connect(url), default_max_attempts=default_max_attempts)

    @contextmanager
    def transaction(self, *, for_user: str | None = None) -> Iterator[None]:
        """One transaction for a use case: every repository call made inside it joins it (see `Database.write`).

        So a use case that checks and then writes (a bound, a parent job, a permission) does both
        in one transaction, and a failure anywhere leaves nothing half-written. `for_user` also
        holds that user's row until the transaction ends, so one user's check-then-write use cases
        (queuing work within the bound, making a job from another job, deleting) run one at a time
        on PostgreSQL too, where reads do not block; SQLite's writers already run one at a time.
        """
        with self.db.write() as session:
            if for_user is not None:
                session.execute(select(User.id).where(User.id == for_user).with_for_update())
            yield

    def close(self) -> None:
        """Close the database connections."""
        self.db.close()

    def __enter__(self) -> JobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def registered_work_queue(db: Database, quotas: QuotaRepository) -> WorkQueue:
    """The one work queue with the policy of every kind that has rules of its own.

    A `train` item carries its job's attempt; a `delete` item cannot be cancelled; the other
    kinds follow the plain rules (`ItemPolicy`).
    """
    queue = WorkQueue(db)
    queue.register(WorkKind.TRAIN.value, TrainPolicy(quotas))
    queue.register(WorkKind.DELETE.value, ItemPolicy(cancel_refusal=DELETE_CANNOT_CANCEL))
    return queue
