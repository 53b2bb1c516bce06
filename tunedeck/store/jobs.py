"""Jobs as people see them: create, read, list, cancel, pause, resume, clone (`deletions.py` deletes them).

A queued job waits as a `train` work item, added in the job's transaction (and again
when it is resumed). What workers do to jobs (claim, heartbeat, finish) is the
work queue's (`work_queue.py`, by the `train` kind's policy); every method here is
scoped by owner, so another user's job is NotFound.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Select, and_, delete, exists, func, or_, select
from sqlalchemy.orm import Session

from tunedeck.config.distribution import placement
from tunedeck.config.loading import validate_config
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue, IssueListError, NotFoundError, StateTransitionError
from tunedeck.core.ids import new_id
from tunedeck.core.states import JobState, WorkState, check_transition
from tunedeck.store.access import Actor, get_owned, scoped
from tunedeck.store.db import Database
from tunedeck.store.job_attempts import new_train_item, waiting_train_item
from tunedeck.store.job_tags import replace_tags, validated_tags
from tunedeck.store.models import (
    BaseModelRecord,
    Checkpoint,
    Dataset,
    DatasetVersion,
    Experiment,
    Job,
    JobTag,
    Metric,
)
from tunedeck.store.quotas import QuotaRepository
from tunedeck.store.records import Page
from tunedeck.store.resume_record import record_resume
from tunedeck.store.retention import purged_message
from tunedeck.store.types import utcnow
from tunedeck.store.work_item_moves import end_item

MAX_PAGE = 200
ACTIVE_STATES = frozenset({JobState.RUNNING, JobState.PAUSING})


class JobSort(StrEnum):
    """What a list of jobs is sorted by."""

    CREATED = "created"
    NAME = "name"
    STATE = "state"
    DURATION = "duration"


OFFSET_MARK = "@"  # a cursor of a page sorted by another column than creation: the jobs already shown


class JobRepository:
    """The person-facing side of jobs."""

    def __init__(self, db: Database, quotas: QuotaRepository, *, default_max_attempts: int = 3) -> None:
        self.db = db
        self.quotas = quotas
        self.default_max_attempts = default_max_attempts

    def enqueue(
        self,
        actor: Actor,
        *,
        name: str,
        config: TrainingConfig | Mapping[str, Any],
        base_model_id: str | None = None,
        train_dataset_version_id: str | None = None,
        validation_dataset_version_id: str | None = None,
        experiment_id: str | None = None,
        priority: int = 0,
        devices_needed: int | None = None,
        max_attempts: int | None = None,
        cloned_from_id: str | None = None,
        stored_bytes: int | None = None,
        guards: Sequence[str] = (),
        tags: Sequence[str] = (),
    ) -> Job:
        """A new queued job owned by `actor`, with the guards and tags it declares, in one transaction.

        The config is validated (ConfigError naming each bad field); every
        referenced object must be visible to `actor` (NotFoundError otherwise);
        a sealed test set is refused as training or validation data (ConfigError
        naming `train_dataset_version_id` / `validation_dataset_version_id`).
        Higher `priority` runs first; `devices_needed` accelerators on one worker (None: the
        config's `devices`; a count that contradicts it is refused).
        QuotaExceededError when the owner is at a limit; `stored_bytes` is their
        measured storage, checked against a storage limit (None: not measured).
        `tags` are checked by the tag rules (TagError naming each bad one).
        """
        tag_list = validated_tags(tags)
        resolved = config if isinstance(config, TrainingConfig) else validate_config(dict(config))
        devices_needed = needed_devices(resolved, devices_needed)
        now = utcnow()
        job = Job(
            id=new_id("job_"),
            owner_id=actor.id,
            name=name,
            state=JobState.QUEUED.value,
            config=resolved.to_json_dict(),
            base_model_id=base_model_id,
            train_dataset_version_id=train_dataset_version_id,
            validation_dataset_version_id=validation_dataset_version_id,
            experiment_id=experiment_id,
            cloned_from_id=cloned_from_id,
            priority=priority,
            devices_needed=devices_needed,
            max_attempts=max_attempts or self.default_max_attempts,
            attempt=0,
            attempt_floor=0,
            created_at=now,
            updated_at=now,
            queued_at=now,
            guards=list(guards),
            tag_rows=[JobTag(tag=tag) for tag in sorted(tag_list)],
        )
        with self.db.write() as session:
            _check_references(session, actor, job)
            self.quotas.refuse_to_queue(session, actor.id, stored_bytes, now=now)
            session.add(job)
            session.flush()  # the job row first: its train item refers to it
            session.add(new_train_item(job, now))
        return job

    def get(self, actor: Actor, job_id: str) -> Job:
        """One job; NotFoundError when absent or not `actor`'s."""
        with self.db.read() as session:
            return get_owned(session, Job, job_id, actor, "job")

    def list(
        self,
        actor: Actor,
        *,
        state: JobState | str | Iterable[JobState | str] | None = None,
        name: str | None = None,
        experiment_id: str | None = None,
        dataset_id: str | None = None,
        base_model_id: str | None = None,
        tag: str | None = None,
        sort: JobSort = JobSort.CREATED,
        descending: bool = True,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Job]:
        """`actor`'s jobs, filtered by state(s), name (substring, any case), experiment, dataset, base model or tag.

        By default newest first: pass the returned `next_cursor` as `cursor` for the next
        page; jobs created meanwhile never shift a page (the cursor is a position, not an
        offset). Sorted by name, state or duration (running jobs so far, jobs never started
        last), the cursor counts the jobs already shown instead; a cursor of the other kind
        starts from the first page.
        """
        limit = max(1, min(limit, MAX_PAGE))
        statement = _filtered(
            scoped(select(Job), Job.owner_id, actor),
            state=state,
            name=name,
            experiment_id=experiment_id,
            dataset_id=dataset_id,
            base_model_id=base_model_id,
            tag=tag,
        )
        if sort is not JobSort.CREATED or (cursor or "").startswith(OFFSET_MARK):
            # A position in creation order means nothing in another order: such a cursor starts from the top.
            offset = _decode_offset(cursor) if (cursor or "").startswith(OFFSET_MARK) else 0
            return self._sorted_page(statement, sort, descending, limit, offset)
        if cursor:
            created_at, job_id = _decode_cursor(cursor)
            if descending:
                after = or_(Job.created_at < created_at, and_(Job.created_at == created_at, Job.id < job_id))
            else:
                after = or_(Job.created_at > created_at, and_(Job.created_at == created_at, Job.id > job_id))
            statement = statement.where(after)
        order = (Job.created_at.desc(), Job.id.desc()) if descending else (Job.created_at.asc(), Job.id.asc())
        with self.db.read() as session:
            rows = list(session.scalars(statement.order_by(*order).limit(limit + 1)))
        more = len(rows) > limit
        items = rows[:limit]
        return Page(items=items, next_cursor=page_cursor(items[-1]) if more and items else None)

    def _sorted_page(
        self, statement: Select[Any], sort: JobSort, descending: bool, limit: int, offset: int
    ) -> Page[Job]:
        """A page of jobs in name, state or duration order, `offset` jobs in (ties in id order)."""
        rows: list[Job]
        with self.db.read() as session:
            if sort is JobSort.DURATION:
                # Durations are differences of two columns, which the two databases compute differently:
                # they are ranked here from the (few, small) timing columns of the filtered jobs.
                timing = statement.with_only_columns(Job.id, Job.started_at, Job.finished_at, Job.state, Job.updated_at)
                timings: list[_Timing] = [(row[0], row[1], row[2], row[3], row[4]) for row in session.execute(timing)]
                ranked = _by_duration(timings, descending, utcnow())
                ids = ranked[offset : offset + limit + 1]
                found = {job.id: job for job in session.scalars(select(Job).where(Job.id.in_(ids)))}
                rows = [found[job_id] for job_id in ids if job_id in found]
            else:
                columns = {JobSort.NAME: Job.name, JobSort.STATE: Job.state, JobSort.CREATED: Job.created_at}
                column = columns[sort]
                order = (column.desc(), Job.id.desc()) if descending else (column.asc(), Job.id.asc())
                rows = list(session.scalars(statement.order_by(*order).offset(offset).limit(limit + 1)))
        more = len(rows) > limit
        return Page(items=rows[:limit], next_cursor=f"{OFFSET_MARK}{offset + limit}" if more else None)

    def set_tags(self, actor: Actor, job_id: str, tags: Sequence[str]) -> Job:
        """Replace the tags of one of `actor`'s jobs, in any state; TagError naming each bad tag."""
        tag_list = validated_tags(tags)
        with self.db.write() as session:
            job = get_owned(session, Job, job_id, actor, "job", for_update=True)
            replace_tags(session, job, tag_list)
        return job

    def tags_in_use(self, actor: Actor) -> Sequence[str]:
        """Every tag on `actor`'s jobs, sorted (what a tag filter offers)."""
        statement = scoped(select(JobTag.tag).join(Job, Job.id == JobTag.job_id), Job.owner_id, actor)
        with self.db.read() as session:
            return sorted(set(session.scalars(statement.distinct())))

    def request_cancel(self, actor: Actor, job_id: str) -> Job:
        """Cancel: a queued or paused job at once; a running one when its worker next heartbeats."""
        with self.db.write() as session:
            waiting = waiting_train_item(session, job_id)  # locked before the job, as a claim does
            job = get_owned(session, Job, job_id, actor, "job", for_update=True)
            current = JobState(job.state)
            check_transition(current, JobState.CANCELLED)
            now = utcnow()
            if current in ACTIVE_STATES:
                job.requested_action = "cancel"
            else:
                _set_state(job, JobState.CANCELLED)
                job.finished_at = now
                if waiting is not None:
                    cancelled = {"detail": "cancelled by its owner", "status": 409}
                    end_item(waiting, WorkState.CANCELLED, now, error=cancelled)
            job.updated_at = now
        return job

    def request_pause(self, actor: Actor, job_id: str) -> Job:
        """Pause a running job: it shows `pausing`, its worker writes a checkpoint, then it is `paused`."""
        with self.db.write() as session:
            job = get_owned(session, Job, job_id, actor, "job", for_update=True)
            current = JobState(job.state)
            if current is JobState.PAUSING:
                return job
            check_transition(current, JobState.PAUSING)
            _set_state(job, JobState.PAUSING)
            job.requested_action = "pause"
        return job

    def resume(self, actor: Actor, job_id: str, *, stored_bytes: int | None = None) -> Job:
        """Put a failed, cancelled or paused job back in the queue, from its newest committed checkpoint.

        The job gets a fresh budget of `max_attempts` lease expiries and a new `train`
        item. Its owner's quotas apply as to a new job (see `enqueue`).
        """
        with self.db.write() as session:
            job = _resumable(session, actor, job_id)
            self._requeue(session, job, stored_bytes)
        return job

    def resume_from(
        self, actor: Actor, job_id: str, step: int, *, stored_bytes: int | None = None
    ) -> tuple[Job, Sequence[str]]:
        """Resume from the committed checkpoint at `step` ("resume from here"), in one transaction.

        Later checkpoints and the metric points after `step` are forgotten (the resumed run
        writes them again, and the series must not mix two timelines). Returns the job and
        the storage prefixes of the forgotten checkpoints, for the caller to delete once this
        returned: a refusal (quota, state, no checkpoint at `step`: NotFoundError) changes nothing.
        """
        with self.db.write() as session:
            job = _resumable(session, actor, job_id)
            target = session.scalar(
                select(Checkpoint).where(
                    Checkpoint.job_id == job.id, Checkpoint.step == step, Checkpoint.state == "committed"
                )
            )
            if target is None:
                raise NotFoundError(f"job {job_id!r} has no committed checkpoint at step {step}")
            later = list(session.scalars(select(Checkpoint).where(Checkpoint.job_id == job.id, Checkpoint.step > step)))
            session.execute(delete(Checkpoint).where(Checkpoint.job_id == job.id, Checkpoint.step > step))
            session.execute(delete(Metric).where(Metric.job_id == job.id, Metric.step > step))
            self._requeue(session, job, stored_bytes)
        return job, [row.storage_prefix for row in later]

    def _requeue(self, session: Session, job: Job, stored_bytes: int | None) -> None:
        self.quotas.refuse_to_queue(session, job.owner_id, stored_bytes)
        # Its data may have been sealed or deleted since it stopped: it must run on neither.
        _refuse_unusable_data(session, job)
        _set_state(job, JobState.QUEUED)
        job.resume_from_step = session.scalar(
            select(func.max(Checkpoint.step)).where(Checkpoint.job_id == job.id, Checkpoint.state == "committed")
        )
        job.requested_action = None
        job.error_message = None
        job.finished_at = None
        job.worker_id = None
        job.attempt_floor = job.attempt
        job.queued_at = utcnow()
        session.add(new_train_item(job, job.queued_at))
        record_resume(session, job)  # the timeline names the step it resumed from

    def clone_with_changes(
        self,
        actor: Actor,
        job_id: str,
        *,
        changes: Mapping[str, Any] | None = None,
        name: str | None = None,
        priority: int | None = None,
        stored_bytes: int | None = None,
        guards: Sequence[str] | None = None,
    ) -> Job:
        """A new queued job with the source job's config, `changes` applied on top (validated as a whole).

        The clone is judged by the source's guards unless `guards` is given. Quotas apply as to a
        new job (see `enqueue`).
        """
        source = self.get(actor, job_id)
        config = validate_config({**copy.deepcopy(source.config), **dict(changes or {})})
        return self.enqueue(
            actor,
            name=name or f"{source.name} (clone)",
            config=config,
            base_model_id=source.base_model_id,
            train_dataset_version_id=source.train_dataset_version_id,
            validation_dataset_version_id=source.validation_dataset_version_id,
            experiment_id=source.experiment_id,
            priority=source.priority if priority is None else priority,
            devices_needed=source.devices_needed,
            max_attempts=source.max_attempts,
            cloned_from_id=source.id,
            stored_bytes=stored_bytes,
            guards=list(source.guards or []) if guards is None else guards,
            tags=source.tags,
        )


def _filtered(
    statement: Select[Any],
    *,
    state: JobState | str | Iterable[JobState | str] | None,
    name: str | None,
    experiment_id: str | None,
    dataset_id: str | None,
    base_model_id: str | None,
    tag: str | None,
) -> Select[Any]:
    """`statement` narrowed to the jobs that pass every filter given."""
    if state is not None:
        states = [state] if isinstance(state, str) else list(state)
        statement = statement.where(Job.state.in_([JobState(s).value for s in states]))
    if name:
        statement = statement.where(func.lower(Job.name).contains(name.lower(), autoescape=True))
    if experiment_id:
        statement = statement.where(Job.experiment_id == experiment_id)
    if dataset_id:
        versions = select(DatasetVersion.id).where(DatasetVersion.dataset_id == dataset_id)
        statement = statement.where(
            or_(Job.train_dataset_version_id.in_(versions), Job.validation_dataset_version_id.in_(versions))
        )
    if base_model_id:
        statement = statement.where(Job.base_model_id == base_model_id)
    if tag:
        statement = statement.where(exists().where(JobTag.job_id == Job.id, JobTag.tag == tag))
    return statement


_Timing = tuple[str, datetime | None, datetime | None, str, datetime]  # id, started, finished, state, updated


def job_duration(job: Job, now: datetime | None = None) -> float | None:
    """Seconds from the job's start to its end, or to `now` while it runs; None before it started.

    A job that stopped without ending (paused, or queued again) counts to its last change of state.
    """
    return _duration_seconds((job.id, job.started_at, job.finished_at, job.state, job.updated_at), now or utcnow())


def _duration_seconds(timing: _Timing, now: datetime) -> float | None:
    _, started, finished, state, updated = timing
    if started is None:
        return None
    end = finished or (now if JobState(state) in ACTIVE_STATES else updated)
    return max(0.0, (end - started).total_seconds())


def _by_duration(rows: Iterable[_Timing], descending: bool, now: datetime) -> list[str]:
    """Job ids by duration (ties by id), jobs never started last whichever the direction."""
    timed = [(_duration_seconds(row, now), row[0]) for row in rows]
    started = sorted(((d, i) for d, i in timed if d is not None), reverse=descending)
    never = sorted((i for d, i in timed if d is None), reverse=descending)
    return [job_id for _, job_id in started] + never


def _decode_offset(cursor: str | None) -> int:
    """The number of jobs already shown that a sorted page's cursor holds (0 without one)."""
    if not cursor:
        return 0
    digits = cursor.removeprefix(OFFSET_MARK)
    if not cursor.startswith(OFFSET_MARK) or not digits.isdigit() or len(digits) > 9:
        raise IssueListError([Issue("invalid cursor", field="cursor", expected="a next_cursor value")])
    return int(digits)


_JOB_PREFIX = "job_"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_STAMP_WIDTH = 11  # base-32 digits of microseconds since 1970: enough until the year 3000
_DIGITS = "0123456789abcdefghijklmnopqrstuv"  # the alphabet int(text, 32) reads


def page_cursor(job: Job) -> str:
    """A position in (created_at, id) order, at most 40 characters (ids alone sort only to the millisecond).

    The id's fixed `job_` prefix is dropped to keep cursors short.
    """
    micros = (job.created_at - _EPOCH) // timedelta(microseconds=1)  # exact, unlike float seconds
    digits = []
    for _ in range(_STAMP_WIDTH):
        micros, rest = divmod(micros, 32)
        digits.append(_DIGITS[rest])
    return "".join(reversed(digits)) + job.id.removeprefix(_JOB_PREFIX)


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        if len(cursor) <= _STAMP_WIDTH:
            raise ValueError("too short")
        micros = int(cursor[:_STAMP_WIDTH], 32)
        created_at = _EPOCH + timedelta(microseconds=micros)
    except (ValueError, OverflowError, OSError):
        raise IssueListError([Issue("invalid cursor", field="cursor", expected="a next_cursor value")]) from None
    return created_at, _JOB_PREFIX + cursor[_STAMP_WIDTH:]


def _resumable(session: Session, actor: Actor, job_id: str) -> Job:
    """The job, locked, if it is failed, cancelled or paused; StateTransitionError otherwise."""
    job = get_owned(session, Job, job_id, actor, "job", for_update=True)
    current = JobState(job.state)
    if current not in (JobState.FAILED, JobState.CANCELLED, JobState.PAUSED):
        raise StateTransitionError(f"only failed, cancelled or paused jobs can be resumed (job is {current})")
    return job


def _set_state(job: Job, target: JobState) -> None:
    check_transition(JobState(job.state), target)
    job.state = target.value
    job.updated_at = utcnow()


SEALED_FOR_TRAINING = (
    "this dataset version is a sealed test set: it is never a job's training or validation data; "
    "evaluate a finished job on it with the explicit final evaluation (`tunedeck eval test`)"
)


def _check_references(session: Session, actor: Actor, job: Job) -> None:
    """Every object the job points at must be visible to its owner; no sealed test set is trained on.

    A sealed version is refused here, below every front end (API, dashboard, CLI,
    clone), so no path can turn the held-out test set into training or validation data.
    """
    references: list[tuple[type[Any], str | None, str]] = [
        (BaseModelRecord, job.base_model_id, "base model"),
        (DatasetVersion, job.train_dataset_version_id, "dataset version"),
        (DatasetVersion, job.validation_dataset_version_id, "dataset version"),
        (Experiment, job.experiment_id, "experiment"),
    ]
    for model, object_id, what in references:
        if object_id is not None:
            get_owned(session, model, object_id, actor, what)
    _refuse_unusable_data(session, job)


def _refuse_unusable_data(session: Session, job: Job) -> None:
    """ConfigError naming each of the job's datasets that is a sealed test set or whose raw data was deleted."""
    issues = []
    purged = []
    for field, version_id in (
        ("train_dataset_version_id", job.train_dataset_version_id),
        ("validation_dataset_version_id", job.validation_dataset_version_id),
    ):
        # Locked: a retention sweep purging this version waits for the job, or the job sees the purge.
        version = session.get(DatasetVersion, version_id, with_for_update=True) if version_id is not None else None
        if version is not None and version.sealed:
            issues.append(
                Issue(SEALED_FOR_TRAINING, field=field, expected="an unsealed dataset version", found=version_id)
            )
        if version is not None and version.purged_at is not None:
            dataset = session.get(Dataset, version.dataset_id)
            name = dataset.name if dataset is not None else version.dataset_id
            message = purged_message(name, version.version, version.purged_at)
            purged.append(Issue(message, field=field, expected="a version whose data is stored", found=version_id))
    if issues:
        raise ConfigError(issues, title="sealed test set")
    if purged:
        raise ConfigError(purged, title="dataset data deleted")


def needed_devices(config: TrainingConfig, asked: int | None) -> int:
    """The accelerators a job reserves on its worker: `asked` when given, else what its config's `devices` says.

    A job that names both must name the same count (a ConfigError otherwise), so the queue
    never reserves a number of devices the run would not use.
    """
    from_config = placement(config).devices_needed
    if asked is None:
        return from_config
    if asked < 0:
        raise ValueError("devices_needed must be >= 0")
    if config.devices != "auto" and asked != from_config:
        raise ConfigError(
            [
                Issue(
                    f"devices_needed {asked} contradicts the config's devices {config.devices}: give one of them",
                    field="devices_needed",
                )
            ]
        )
    return asked
