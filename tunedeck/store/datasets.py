"""Datasets and their immutable versions, scoped by owner; sealed test sets log every access."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tunedeck.core.errors import StateTransitionError
from tunedeck.core.ids import new_id
from tunedeck.core.states import TERMINAL_STATES
from tunedeck.store.access import Actor, get_owned, scoped
from tunedeck.store.access_log import DataRead, Reader, add_access_entry
from tunedeck.store.db import Database
from tunedeck.store.errors import AlreadyExistsError
from tunedeck.store.models import Dataset, DatasetVersion, Job, TestSetAccess
from tunedeck.store.types import utcnow


class DatasetRepository:
    """Create and read datasets and their versions (`deletions.py` deletes them)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create_dataset(self, actor: Actor, name: str) -> Dataset:
        """A new empty dataset owned by `actor`; AlreadyExistsError when they have one of that name."""
        dataset = Dataset(id=new_id("ds_"), owner_id=actor.id, name=name, created_at=utcnow())
        try:
            with self.db.write() as session:
                session.add(dataset)
        except IntegrityError:
            raise AlreadyExistsError(f"dataset {name!r} already exists") from None
        return dataset

    def store_upload(
        self,
        actor: Actor,
        *,
        dataset_id: str | None,
        name: str | None,
        sha256: str,
        format: str,
        rows: int,
        storage_key: str,
        kind: str,
        manifest: dict[str, Any],
        reports: dict[str, Any],
        licence: str | None = None,
        rights_note: str | None = None,
    ) -> tuple[Dataset, DatasetVersion]:
        """Record an ingested upload in one transaction: a new dataset `name` with version 1, or the next
        version of `dataset_id`.

        `licence` and `rights_note` are the dataset's recorded rights: a new dataset takes them, and a
        new version that names one replaces the dataset's (one left out keeps what was recorded).

        Idempotent on `storage_key`: a retried ingestion whose rows were already recorded gets them back.
        AlreadyExistsError when `name` is taken; NotFoundError when `dataset_id` is gone.
        """
        try:
            with self.db.write() as session:
                existing = session.scalar(select(DatasetVersion).where(DatasetVersion.storage_key == storage_key))
                if existing is not None:
                    return get_owned(session, Dataset, existing.dataset_id, actor, "dataset"), existing
                if dataset_id is None:
                    dataset = Dataset(
                        id=new_id("ds_"), owner_id=actor.id, name=str(name), created_at=utcnow(),
                        licence=licence, rights_note=rights_note,
                    )  # fmt: skip
                    session.add(dataset)
                    session.flush()  # the name's uniqueness is checked here, inside the transaction
                else:
                    dataset = get_owned(session, Dataset, dataset_id, actor, "dataset", for_update=True)
                    if licence is not None:
                        dataset.licence = licence
                    if rights_note is not None:
                        dataset.rights_note = rights_note
                version = _append_version(
                    session, dataset, sha256=sha256, format=format, kind=kind, rows=rows, storage_key=storage_key,
                    manifest=manifest, reports=reports, sealed=False,
                )  # fmt: skip
        except IntegrityError:
            raise AlreadyExistsError(f"dataset {name!r} already exists") from None
        return dataset, version

    def set_rights(self, actor: Actor, dataset_id: str, changes: dict[str, str | None]) -> Dataset:
        """Set the recorded `licence` and/or `rights_note` of a dataset (None clears one); the dataset.

        Only the keys in `changes` change. NotFoundError when absent or not `actor`'s.
        """
        unknown = set(changes) - {"licence", "rights_note"}
        if unknown:
            raise ValueError(f"not a dataset rights field: {', '.join(sorted(unknown))}")
        with self.db.write() as session:
            dataset = get_owned(session, Dataset, dataset_id, actor, "dataset", for_update=True)
            for key, value in changes.items():
                setattr(dataset, key, value)
            return dataset

    def find_by_name(self, actor: Actor, name: str) -> Dataset | None:
        """`actor`'s dataset called `name`, if there is one."""
        with self.db.read() as session:
            return session.scalar(select(Dataset).where(Dataset.owner_id == actor.id, Dataset.name == name))

    def get_dataset(self, actor: Actor, dataset_id: str) -> Dataset:
        """One dataset; NotFoundError when absent or not `actor`'s."""
        with self.db.read() as session:
            return get_owned(session, Dataset, dataset_id, actor, "dataset")

    def list_datasets(self, actor: Actor) -> list[Dataset]:
        """`actor`'s datasets (every dataset for an admin), oldest first."""
        with self.db.read() as session:
            return list(session.scalars(scoped(select(Dataset), Dataset.owner_id, actor).order_by(Dataset.id)))

    def add_version(
        self,
        actor: Actor,
        dataset_id: str,
        *,
        sha256: str,
        format: str,
        rows: int,
        storage_key: str,
        kind: str = "train",
        manifest: dict[str, Any] | None = None,
        reports: dict[str, Any] | None = None,
        sealed: bool = False,
    ) -> DatasetVersion:
        """Add the next version (1, 2, ...) of a dataset; its content is never changed afterwards."""
        with self.db.write() as session:
            # Locking the dataset row serialises concurrent uploads to the same dataset.
            dataset = get_owned(session, Dataset, dataset_id, actor, "dataset", for_update=True)
            return _append_version(
                session, dataset, sha256=sha256, format=format, kind=kind, rows=rows, storage_key=storage_key,
                manifest=manifest or {}, reports=reports or {}, sealed=sealed,
            )  # fmt: skip

    def get_version(self, actor: Actor, version_id: str) -> DatasetVersion:
        """One dataset version; NotFoundError when absent or not `actor`'s."""
        with self.db.read() as session:
            return get_owned(session, DatasetVersion, version_id, actor, "dataset version")

    def versions_owned_by(self, owner_id: str) -> list[DatasetVersion]:
        """Every version of every dataset `owner_id` owns, by id (oldest first)."""
        with self.db.read() as session:
            statement = select(DatasetVersion).where(DatasetVersion.owner_id == owner_id)
            return list(session.scalars(statement.order_by(DatasetVersion.id)))

    def list_versions(self, actor: Actor, dataset_id: str) -> list[DatasetVersion]:
        """The versions of one of `actor`'s datasets, oldest first."""
        with self.db.read() as session:
            get_owned(session, Dataset, dataset_id, actor, "dataset")
            return list(
                session.scalars(
                    select(DatasetVersion)
                    .where(DatasetVersion.dataset_id == dataset_id)
                    .order_by(DatasetVersion.version)
                )
            )

    def set_reports(self, actor: Actor, version_id: str, reports: dict[str, Any]) -> DatasetVersion:
        """Merge validation / dedup / scan reports into a version (reports are derived, not content)."""
        with self.db.write() as session:
            version = get_owned(session, DatasetVersion, version_id, actor, "dataset version", for_update=True)
            version.reports = {**version.reports, **reports}
        return version

    def seal(self, actor: Actor, version_id: str) -> DatasetVersion:
        """Mark a version as a held-out test set: from now on every read is recorded.

        Sealing is one-way and idempotent. It is refused (StateTransitionError) while a
        job that has not finished trains or validates on the version: that job would go
        on reading the test set, and a sealed version is never training data.
        """
        with self.db.write() as session:
            version = get_owned(session, DatasetVersion, version_id, actor, "dataset version", for_update=True)
            if version.sealed:
                return version
            users = list(
                session.scalars(
                    select(Job.id)
                    .where(
                        or_(
                            Job.train_dataset_version_id == version.id,
                            Job.validation_dataset_version_id == version.id,
                        ),
                        Job.state.not_in([state.value for state in TERMINAL_STATES]),
                    )
                    .order_by(Job.id)
                    .limit(5)
                )
            )
            if users:
                raise StateTransitionError(
                    f"dataset version {version.id!r} is the training or validation data of unfinished "
                    f"job(s) {', '.join(users)}: cancel or finish them before sealing it"
                )
            version.sealed = True
        return version

    def record_test_set_access(
        self, actor: Actor, version_id: str, *, job_id: str | None = None, purpose: str = "", via: str = "cli"
    ) -> TestSetAccess:
        """Log that `actor` (or their job) read a sealed test set, here and in the owner's access log (`via`)."""
        with self.db.write() as session:
            version = get_owned(session, DatasetVersion, version_id, actor, "dataset version")
            access = TestSetAccess(
                dataset_version_id=version.id, job_id=job_id, user_id=actor.id, purpose=purpose, time=utcnow()
            )
            session.add(access)
            read = DataRead(
                owner_id=version.owner_id,
                object_kind="test_set",
                object_id=version.id,
                object_label=version_label(session, version),
                action="read",
                via=via,
            )
            add_access_entry(session, Reader(actor.id, str(getattr(actor, "name", actor.id))), read)
        return access

    def list_test_set_accesses(self, actor: Actor, version_id: str) -> list[TestSetAccess]:
        """Every recorded read of one of `actor`'s test sets, oldest first."""
        with self.db.read() as session:
            get_owned(session, DatasetVersion, version_id, actor, "dataset version")
            return list(
                session.scalars(
                    select(TestSetAccess)
                    .where(TestSetAccess.dataset_version_id == version_id)
                    .order_by(TestSetAccess.id)
                )
            )


def _append_version(session: Session, dataset: Dataset, **fields: Any) -> DatasetVersion:
    """Add the next version of `dataset` (whose row the caller has locked or just created)."""
    latest = session.scalar(select(func.max(DatasetVersion.version)).where(DatasetVersion.dataset_id == dataset.id))
    version = DatasetVersion(
        id=new_id("dsv_"),
        dataset_id=dataset.id,
        owner_id=dataset.owner_id,
        version=(latest or 0) + 1,
        created_at=utcnow(),
        **fields,
    )
    session.add(version)
    return version


def version_label(session: Session, version: DatasetVersion) -> str:
    """How a version is named to people: `<dataset name> v<number>`."""
    dataset = session.get(Dataset, version.dataset_id)
    return f"{dataset.name if dataset is not None else version.dataset_id} v{version.version}"
