"""The database schema as typed SQLAlchemy 2 models.

Every object a person creates carries `owner_id`; the repositories scope every
query by it. Ids are `tunedeck.core.ids.new_id` strings (time-sortable), except
the high-volume append-only tables (events, metrics, logs) which use integers.
Migrations in `migrations/versions/` must match these models
(`tests/unit/store/test_schema_and_engine.py` checks it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from tunedeck.store.types import BigIntId, JSONColumn, UTCDateTime, utcnow

ID = String(40)
# Deterministic constraint names, so migrations can refer to them on both databases.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base with the naming convention."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSONColumn, datetime: UTCDateTime()}


def _owner() -> Mapped[str]:
    return mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), index=True)


class User(Base):
    """A person or service account; `role` is `admin` (sees everything) or `user`."""

    __tablename__ = "users"
    __table_args__ = (CheckConstraint("role IN ('admin', 'user')", name="role"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    role: Mapped[str] = mapped_column(String(10), default="user")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # A disabled user's tokens and sessions stop working at once; their objects stay.
    disabled_at: Mapped[datetime | None] = mapped_column(default=None)
    # The dashboard language the user chose ("en", "fr"); NULL follows the browser's.
    locale: Mapped[str | None] = mapped_column(String(8), default=None)

    @property
    def is_admin(self) -> bool:
        """Whether this user sees every user's objects."""
        return self.role == "admin"


class Quota(Base):
    """Limits the operator sets: one row for everyone (`subject` = `*`) and one per user who differs.

    A NULL limit in a user's row takes the everyone row's value; NULL there means no limit.
    """

    __tablename__ = "quotas"

    subject: Mapped[str] = mapped_column(ID, primary_key=True)
    running_jobs: Mapped[int | None] = mapped_column(Integer, default=None)
    queued_jobs: Mapped[int | None] = mapped_column(Integer, default=None)
    storage_bytes: Mapped[int | None] = mapped_column(BigInteger, default=None)
    device_hours: Mapped[float | None] = mapped_column(Float, default=None)
    period_days: Mapped[int | None] = mapped_column(Integer, default=None)
    updated_by: Mapped[str | None] = mapped_column(ID, default=None)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ApiToken(Base):
    """An API token; only the SHA-256 of the secret is stored, never the secret itself."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(100), default="default")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)


class WebSession(Base):
    """A dashboard sign-in: only the SHA-256 of the cookie's secret is stored; deleting the row ends it.

    A session belongs to the token it was opened with: revoking that token ends it too.
    """

    __tablename__ = "web_sessions"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_id: Mapped[str] = mapped_column(ID, ForeignKey("api_tokens.id", ondelete="CASCADE"), index=True)
    secret_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]


class Dataset(Base):
    """A named dataset of one owner; its content lives in immutable versions."""

    __tablename__ = "datasets"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner_id: Mapped[str] = _owner()
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The rights its owner recorded (`tunedeck.core.dataset_rights`); NULL: not recorded.
    licence: Mapped[str | None] = mapped_column(String(200), default=None)
    rights_note: Mapped[str | None] = mapped_column(Text, default=None)


class DatasetVersion(Base):
    """One uploaded content of a dataset: checksum, format, row count, where it is stored, reports.

    `sealed` marks a held-out test set: reading it is logged in `test_set_accesses`.
    """

    __tablename__ = "dataset_versions"
    __table_args__ = (UniqueConstraint("dataset_id", "version"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    dataset_id: Mapped[str] = mapped_column(ID, ForeignKey("datasets.id", ondelete="CASCADE"), index=True)
    owner_id: Mapped[str] = _owner()
    version: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    format: Mapped[str] = mapped_column(String(20))
    kind: Mapped[str] = mapped_column(String(20), default="train")
    rows: Mapped[int] = mapped_column(Integer, default=0)
    storage_key: Mapped[str] = mapped_column(String(500))
    manifest: Mapped[dict[str, Any]] = mapped_column(default=dict)
    sealed: Mapped[bool] = mapped_column(Boolean, default=False)
    reports: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # When a retention policy deleted the stored rows; the row stays (reports, checksum, jobs' lineage).
    purged_at: Mapped[datetime | None] = mapped_column(default=None)


class RetentionPolicy(Base):
    """How long an owner keeps things, in days (NULL: as long as the operator allows).

    `dataset_id` NULL is the owner's user-wide policy; otherwise it applies to that
    dataset's versions and the jobs trained on it. NULLs are distinct in unique
    constraints on both databases, so the repository keeps one user-wide row per owner.
    """

    __tablename__ = "retention_policies"
    __table_args__ = (UniqueConstraint("owner_id", "dataset_id"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner_id: Mapped[str] = _owner()
    dataset_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("datasets.id", ondelete="CASCADE"), default=None, index=True
    )
    raw_data_days: Mapped[int | None] = mapped_column(Integer, default=None)
    checkpoint_days: Mapped[int | None] = mapped_column(Integer, default=None)
    job_days: Mapped[int | None] = mapped_column(Integer, default=None)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class BaseModelRecord(Base):
    """A base model: a hub id (+ revision) or a local path, pinned to a resolved commit or fingerprint."""

    __tablename__ = "base_models"

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner_id: Mapped[str] = _owner()
    name: Mapped[str] = mapped_column(String(200))
    hub_id: Mapped[str | None] = mapped_column(String(300), default=None)
    local_path: Mapped[str | None] = mapped_column(String(1000), default=None)
    revision: Mapped[str | None] = mapped_column(String(200), default=None)
    resolved: Mapped[str | None] = mapped_column(String(200), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # Set by an admin: the model's own code (config auto_map) may run when a job asks for trust_remote_code.
    remote_code_allowed_by: Mapped[str | None] = mapped_column(ID, default=None)
    remote_code_allowed_at: Mapped[datetime | None] = mapped_column(default=None)


class Experiment(Base):
    """A question asked of several jobs: a hypothesis and the reference config they vary."""

    __tablename__ = "experiments"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner_id: Mapped[str] = _owner()
    name: Mapped[str] = mapped_column(String(200))
    hypothesis: Mapped[str] = mapped_column(Text, default="")
    reference_config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RentalPlan(Base):
    """The rental of a machine planned around an experiment's phases, and when the rental started.

    `workload` (the variants, their rows and epochs, the evaluation sets' rows) and `figures`
    (each rate measured or estimated, with its basis) are kept as they were when the plan was
    made, so the timeline reads the same later; `machine` is the device type and count.
    """

    __tablename__ = "rental_plans"
    __table_args__ = (Index("ix_rental_plans_owner_id_id", "owner_id", "id"),)

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"))
    experiment_id: Mapped[str] = mapped_column(ID, ForeignKey("experiments.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    machine: Mapped[dict[str, Any]] = mapped_column()
    price_per_hour: Mapped[float | None] = mapped_column(Float, default=None)
    margin_share: Mapped[float] = mapped_column(Float)
    # The rental length tracked against (3, 7 or 30 days); NULL: the shortest that holds the plan.
    rental_days: Mapped[int | None] = mapped_column(Integer, default=None)
    workload: Mapped[dict[str, Any]] = mapped_column()
    figures: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)


class Job(Base):
    """A training job: its config, its state, and what its attempts have done.

    It waits and runs as a `train` work item, which holds its lease and fencing hash.
    `worker_id` is the worker running it (NULL while it waits); `attempt` counts claims
    so far and never decreases; `attempt_floor` is `attempt` at the last resume, so a
    resumed job gets `max_attempts` fresh lease expiries.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_queue", "state", "priority", "queued_at"),
        Index("ix_jobs_owner_id_id", "owner_id", "id"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(20))
    config: Mapped[dict[str, Any]] = mapped_column()
    base_model_id: Mapped[str | None] = mapped_column(ID, ForeignKey("base_models.id", ondelete="SET NULL"))
    train_dataset_version_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("dataset_versions.id", ondelete="SET NULL")
    )
    validation_dataset_version_id: Mapped[str | None] = mapped_column(
        ID, ForeignKey("dataset_versions.id", ondelete="SET NULL")
    )
    experiment_id: Mapped[str | None] = mapped_column(ID, ForeignKey("experiments.id", ondelete="SET NULL"))
    cloned_from_id: Mapped[str | None] = mapped_column(ID, default=None)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    devices_needed: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    queued_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    worker_id: Mapped[str | None] = mapped_column(String(200), default=None)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    attempt_floor: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    requested_action: Mapped[str | None] = mapped_column(String(10), default=None)
    resume_from_step: Mapped[int | None] = mapped_column(Integer, default=None)
    error_message: Mapped[str | None] = mapped_column(Text, default=None)
    diagnosis: Mapped[dict[str, Any] | None] = mapped_column(JSONColumn, default=None)
    # What must not degrade, as compact guard strings; NULL for jobs made before guards had a column.
    guards: Mapped[list[str] | None] = mapped_column(JSONColumn, default=None)
    # Its tags, read with the job (one more query per read of jobs) and removed with it.
    tag_rows: Mapped[list[JobTag]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", passive_deletes=True, order_by="JobTag.tag"
    )

    @property
    def tags(self) -> list[str]:
        """The job's tags, sorted."""
        return [row.tag for row in self.tag_rows]


class JobTag(Base):
    """One tag of a job: short metadata its owner sets to find jobs again (not part of its training config)."""

    __tablename__ = "job_tags"
    __table_args__ = (Index("ix_job_tags_tag", "tag"),)

    job_id: Mapped[str] = mapped_column(ID, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(32), primary_key=True)


class FineTuningRequest(Base):
    """What a job created through the OpenAI-compatible API was asked with, beyond its tunedeck config.

    One row per such job (deleted with it): the fine-tuned model's suffix, the caller's
    metadata pairs, the method and hyperparameters as sent, the integrations, and the base
    model's name when the job was created (its fine-tuned model is named after it).
    """

    __tablename__ = "fine_tuning_requests"

    job_id: Mapped[str] = mapped_column(ID, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    model: Mapped[str] = mapped_column(String(200))
    suffix: Mapped[str | None] = mapped_column(String(64), default=None)
    metadata_pairs: Mapped[dict[str, Any]] = mapped_column(default=dict)
    method: Mapped[dict[str, Any]] = mapped_column(default=dict)
    hyperparameters: Mapped[dict[str, Any]] = mapped_column(default=dict)
    integrations: Mapped[list[dict[str, Any]]] = mapped_column(JSONColumn, default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class JobEvent(Base):
    """One line of a run's `events.jsonl`.

    Keyed by (job, attempt, seq) where `seq` is the line number: re-ingesting a
    file after a crash inserts nothing twice, and a later attempt (which starts
    a new events file) does not collide with an earlier one.
    Events the platform records itself between runs (a resume) take negative
    seqs, which no line of a run's file can.
    """

    __tablename__ = "job_events"
    __table_args__ = (UniqueConstraint("job_id", "attempt", "seq"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ID, ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    seq: Mapped[int] = mapped_column(Integer)
    type: Mapped[str] = mapped_column(String(20))
    payload: Mapped[dict[str, Any]] = mapped_column()
    time: Mapped[datetime] = mapped_column(default=utcnow)


class Metric(Base):
    """One value of a named series at a step; the (job, name, step) key also indexes series reads."""

    __tablename__ = "metrics"
    __table_args__ = (UniqueConstraint("job_id", "name", "step"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ID, ForeignKey("jobs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    step: Mapped[int] = mapped_column(Integer)
    # NULL stands for NaN: SQLite cannot store NaN, and a NaN loss is worth keeping.
    value: Mapped[float | None] = mapped_column(Float, nullable=True)


class Checkpoint(Base):
    """A job's checkpoint: `written` on the worker's disk, then `committed` to storage with its manifest."""

    __tablename__ = "checkpoints"
    __table_args__ = (
        UniqueConstraint("job_id", "step"),
        CheckConstraint("state IN ('written', 'committed')", name="state"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    job_id: Mapped[str] = mapped_column(ID, ForeignKey("jobs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    storage_prefix: Mapped[str] = mapped_column(String(500))
    state: Mapped[str] = mapped_column(String(10), default="written")
    manifest_sha256: Mapped[str | None] = mapped_column(String(64), default=None)
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)
    is_best: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    committed_at: Mapped[datetime | None] = mapped_column(default=None)


class TestSetAccess(Base):
    """Who read a sealed test set, when, and for which job (the experiment method: the test set is looked at once)."""

    __tablename__ = "test_set_accesses"
    __test__ = False  # not a pytest test class despite the name

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    dataset_version_id: Mapped[str] = mapped_column(ID, ForeignKey("dataset_versions.id", ondelete="CASCADE"))
    job_id: Mapped[str | None] = mapped_column(ID, ForeignKey("jobs.id", ondelete="SET NULL"), default=None)
    user_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"))
    purpose: Mapped[str] = mapped_column(String(200), default="")
    time: Mapped[datetime] = mapped_column(default=utcnow)


class FencingLog(Base):
    """One row per claim: which worker held which job with which token, from when until when.

    Kept after the job ends so a test (or an operator) can prove that no job was
    held by two workers at once.
    """

    __tablename__ = "fencing_log"
    __table_args__ = (Index("ix_fencing_log_job_id_attempt", "job_id", "attempt"),)

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ID, ForeignKey("jobs.id", ondelete="CASCADE"))
    worker_id: Mapped[str] = mapped_column(String(200))
    token_sha256: Mapped[str] = mapped_column(String(64))
    attempt: Mapped[int] = mapped_column(Integer)
    claimed_at: Mapped[datetime] = mapped_column(default=utcnow)
    released_at: Mapped[datetime | None] = mapped_column(default=None)
    release_reason: Mapped[str | None] = mapped_column(String(40), default=None)


class WorkItem(Base):
    """A piece of work for a worker: a job's training, an export, a preflight, an inspection, a generation.

    Every kind is queued here, taken in `priority` order (high first) then first in,
    first out, and claimed with a lease and a fencing token; it ends with a `result`
    (JSON) or an `error`. A `train` item is its job's place in the queue (`job_id`).
    `dedup_key` (the hash of its kind and inputs) is kept while the item is queued,
    running or succeeded, so an identical request finds it instead of doing the work
    twice; a failed or cancelled item lets go of it.
    """

    __tablename__ = "work_items"
    __table_args__ = (
        UniqueConstraint("kind", "dedup_key"),
        Index("ix_work_items_queue", "state", "kind", "priority", "created_at"),
        Index("ix_work_items_owner_id_id", "owner_id", "id"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20))
    inputs: Mapped[dict[str, Any]] = mapped_column()
    dedup_key: Mapped[str | None] = mapped_column(String(64), default=None)
    job_id: Mapped[str | None] = mapped_column(ID, ForeignKey("jobs.id", ondelete="CASCADE"), default=None)
    devices_needed: Mapped[int] = mapped_column(Integer, default=0)
    # Machines the item spans: more than one needs a worker in front of a cluster (Ray).
    machines_needed: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    progress: Mapped[dict[str, Any]] = mapped_column(default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONColumn, default=None)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONColumn, default=None)
    worker_id: Mapped[str | None] = mapped_column(String(200), default=None)
    lease_until: Mapped[datetime | None] = mapped_column(default=None)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    fencing_sha256: Mapped[str | None] = mapped_column(String(64), default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)


class AccessLogEntry(Base):
    """One read of a user's raw data (rows of a dataset, a test set, an export, a checkpoint, a final model).

    Append-only. The entries go with their owner (`owner_id` cascades); `reader_id` is a plain
    id, not a foreign key, so deleting a reader (an admin among them) never erases the record
    of what they read, and a reader that is not a user row (the server's CLI) can be named.
    `reader_name` is the name the reader had then, kept for the same reason.
    """

    __tablename__ = "access_log"
    __table_args__ = (
        CheckConstraint(
            "object_kind IN ('dataset_version', 'test_set', 'export', 'checkpoint', 'final_model')",
            name="object_kind",
        ),
        CheckConstraint("action IN ('download', 'preview', 'read')", name="action"),
        CheckConstraint("via IN ('api', 'web', 'cli')", name="via"),
        # Serves the owner-scoped, newest-first listing.
        Index("ix_access_log_owner_id_id", "owner_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigIntId, primary_key=True, autoincrement=True)
    owner_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"))
    reader_id: Mapped[str] = mapped_column(ID)
    reader_name: Mapped[str] = mapped_column(String(100), default="")
    object_kind: Mapped[str] = mapped_column(String(20))
    object_id: Mapped[str] = mapped_column(String(200))
    object_label: Mapped[str] = mapped_column(String(300), default="")
    action: Mapped[str] = mapped_column(String(10))
    via: Mapped[str] = mapped_column(String(10))
    client_address: Mapped[str | None] = mapped_column(String(64), default=None)
    at: Mapped[datetime] = mapped_column(default=utcnow)


class DeletionReceipt(Base):
    """What deleting an object removed, where: database rows at once, then every copy a worker removes.

    A receipt outlives what it describes: nothing points from it to the deleted object. It
    belongs to whoever asked (an admin for a user's deletion), so it stays when its target
    was a user. `removed` lists `{"where", "what", "count", "bytes"}` entries, one per place.
    """

    __tablename__ = "deletion_receipts"
    __table_args__ = (
        CheckConstraint("target_kind IN ('dataset', 'dataset_version', 'job', 'export', 'user')", name="target_kind"),
        CheckConstraint("state IN ('pending', 'done', 'failed')", name="state"),
        Index("ix_deletion_receipts_owner_id_id", "owner_id", "id"),
    )

    id: Mapped[str] = mapped_column(ID, primary_key=True)
    owner_id: Mapped[str] = mapped_column(ID, ForeignKey("users.id", ondelete="CASCADE"))
    target_kind: Mapped[str] = mapped_column(String(20))
    target_id: Mapped[str] = mapped_column(String(200))
    target_label: Mapped[str] = mapped_column(String(300), default="")
    # Free text on purpose: a retention policy adds its own reasons beside `request`.
    reason: Mapped[str] = mapped_column(String(40), default="request", server_default="request")
    state: Mapped[str] = mapped_column(String(10), default="pending")
    requested_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    # No foreign key: the receipt stays when old work items are cleared.
    work_item_id: Mapped[str | None] = mapped_column(ID, default=None)
    removed: Mapped[list[dict[str, Any]]] = mapped_column(JSONColumn, default=list)


class EncryptionKeyCheck(Base):
    """The check value of each encryption key, recorded when the installation first used it.

    A key file holding another secret under a known id (a copy from another machine, a typo)
    is refused at start instead of sealing new objects no one can read with the right key.
    """

    __tablename__ = "encryption_key_checks"

    key_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    check_value: Mapped[str] = mapped_column(String(64))
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)
