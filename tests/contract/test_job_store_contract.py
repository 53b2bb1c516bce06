"""The job store behaves identically on SQLite and PostgreSQL: users, isolation, jobs, telemetry."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, select, text

from tests.fixtures.job_claims import claim_job
from tunedeck.core.errors import ConfigError, IssueListError, NotFoundError, StateTransitionError
from tunedeck.core.states import JobState, WorkState
from tunedeck.service.privacy.deletion_plan import request_deletion
from tunedeck.store.db import current_revision, migration_revisions, upgrade_database
from tunedeck.store.downsample import lttb
from tunedeck.store.errors import AlreadyExistsError
from tunedeck.store.fencing import new_fencing_token
from tunedeck.store.models import ApiToken, User
from tunedeck.store.records import MetricPoint
from tunedeck.store.store import JobStore
from tunedeck.store.telemetry import event_from_record, metric_points
from tunedeck.store.train_policy import JobEnd

CONFIG = {"epochs": 1, "batch_size": 2, "learning_rate": 1e-4}


def _fresh_database(request: pytest.FixtureRequest, database_url: str, sqlite_name: str) -> str:
    """An empty, unmigrated database of the same backend as `database_url`."""
    if database_url.startswith("sqlite"):
        return f"sqlite:///{request.getfixturevalue('tmp_path') / sqlite_name}"
    return str(request.getfixturevalue("postgres_database_factory")())


def test_migrations_create_every_table_from_empty(request: pytest.FixtureRequest, database_url: str) -> None:
    url = _fresh_database(request, database_url, "fresh.db")
    assert current_revision(url) is None
    upgrade_database(url)
    upgrade_database(url)  # a second run is a no-op
    assert current_revision(url) == migration_revisions()[-1]
    with JobStore.open(url, migrate=False) as store:
        tables = set(inspect(store.db.engine).get_table_names())
    assert {
        "users", "api_tokens", "datasets", "dataset_versions", "base_models", "experiments", "jobs",
        "job_events", "metrics", "checkpoints", "test_set_accesses", "fencing_log", "web_sessions",
        "quotas", "work_items", "access_log", "deletion_receipts", "retention_policies", "fine_tuning_requests",
        "rental_plans", "job_tags",
    } <= tables  # fmt: skip


def test_a_database_of_the_first_release_upgrades_keeping_its_rows(
    request: pytest.FixtureRequest, database_url: str
) -> None:
    url = _fresh_database(request, database_url, "first-release.db")
    upgrade_database(url, "0001")
    _insert_old_user(url, "usr_alice", "alice")
    with JobStore.open(url) as store:  # what a server of this release does when it starts
        assert current_revision(url) == migration_revisions()[-1]
        alice = store.users.get_user_by_name("alice")
        assert alice.id == "usr_alice" and alice.disabled_at is None
        assert store.work.submit(alice, "export", {}, identity={"x": 1})[1]
        assert "work_leases" not in set(inspect(store.db.engine).get_table_names())
        assert store.users.issue_token(alice)[0].startswith("tdk_")


def _insert_old_user(url: str, user_id: str, name: str) -> None:
    """A user row as the first release wrote it (the ORM of this release knows later columns)."""
    with JobStore.open(url, migrate=False) as store, store.db.write() as session:
        session.execute(
            text("INSERT INTO users (id, name, role, created_at) VALUES (:id, :name, 'user', :now)"),
            {"id": user_id, "name": name, "now": datetime.now(UTC)},
        )


def test_base_models_of_an_earlier_release_upgrade_with_their_code_not_allowed(
    request: pytest.FixtureRequest, database_url: str
) -> None:
    url = _fresh_database(request, database_url, "release-2.db")
    upgrade_database(url, "0002")
    _insert_old_user(url, "usr_alice", "alice")
    with JobStore.open(url, migrate=False) as store, store.db.write() as session:
        # The row as that release wrote it, without the later columns.
        session.execute(
            text(
                "INSERT INTO base_models (id, owner_id, name, hub_id, revision, created_at) "
                "VALUES ('bm_old', 'usr_alice', 'old', 'org/old', 'main', :now)"
            ),
            {"now": datetime.now(UTC)},
        )
    with JobStore.open(url) as store:
        assert current_revision(url) == migration_revisions()[-1]
        kept = store.base_models.get(store.users.get_user_by_name("alice"), "bm_old")
        assert kept.hub_id == "org/old" and kept.remote_code_allowed_at is None


def test_jobs_waiting_or_held_before_the_upgrade_keep_their_place_and_their_worker(
    request: pytest.FixtureRequest, database_url: str
) -> None:
    url = _fresh_database(request, database_url, "release-7.db")
    upgrade_database(url, "0007")
    token, digest = new_fencing_token()
    now = datetime.now(UTC)
    with JobStore.open(url, migrate=False) as store, store.db.write() as session:
        session.execute(text("INSERT INTO users (id, name, role, created_at) VALUES ('usr_a', 'a', 'user', :now)"),
                        {"now": now})  # fmt: skip
        for job_id, state, lease, fencing, queued in (
            ("job_held", "running", now + timedelta(minutes=5), digest, now - timedelta(minutes=9)),
            ("job_next", "queued", None, None, now - timedelta(minutes=8)),
            ("job_done", "succeeded", None, None, now - timedelta(minutes=7)),
        ):
            session.execute(
                text(
                    "INSERT INTO jobs (id, owner_id, name, state, config, priority, devices_needed, created_at, "
                    "updated_at, queued_at, worker_id, lease_until, attempt, attempt_floor, max_attempts, "
                    "fencing_sha256) VALUES (:id, 'usr_a', :id, :state, '{}', 0, 0, :queued, :queued, :queued, "
                    ":worker, :lease, :attempt, 0, 3, :fencing)"
                ),
                {"id": job_id, "state": state, "queued": queued, "lease": lease, "fencing": fencing,
                 "worker": "w-old" if state == "running" else None, "attempt": 1 if state == "running" else 0},
            )  # fmt: skip
        session.execute(text("INSERT INTO metrics (job_id, name, step, value) VALUES ('job_done', 'loss', 1, 0.5)"))
    with JobStore.open(url) as store:
        assert current_revision(url) == migration_revisions()[-1]
        # SQLite rebuilt the jobs table to drop its lease columns: what points at jobs is all still there.
        with store.db.read() as session:
            assert session.execute(text("SELECT job_id, value FROM metrics")).all() == [("job_done", 0.5)]
        user = store.users.get_user("usr_a")
        # The worker that held a job before the upgrade still holds it with its token.
        (held,) = store.work.list_items(user, job_id="job_held")
        beat = store.queue.heartbeat(held.id, token, 60)
        assert beat and beat.state is JobState.RUNNING
        assert store.queue.lease_until(held.id) is not None
        claimed = claim_job(store, "w-new", devices=0, lease_s=60)
        assert claimed is not None and claimed.job_id == "job_next"
        assert claim_job(store, "w-new", devices=0, lease_s=60) is None
        assert store.work.list_items(user, job_id="job_done") == []
        assert store.queue.finish(held.id, token, JobEnd(JobState.SUCCEEDED))
        assert [item.state for item in store.work.list_items(user, job_id="job_held")] == [WorkState.SUCCEEDED]


def test_tokens_are_stored_only_as_sha256(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    plain, row = job_store.users.issue_token(alice, name="laptop")
    assert plain.startswith("tdk_") and len(plain) > 40
    assert job_store.users.authenticate(plain).id == alice.id  # type: ignore[union-attr]
    assert job_store.users.authenticate(plain + "x") is None
    assert job_store.users.authenticate("") is None
    with job_store.db.read() as session:
        stored = session.scalars(select(ApiToken)).one()
        dump = "\n".join(str(r) for r in session.execute(text("SELECT * FROM api_tokens")).all())
    assert stored.token_sha256 != plain and len(stored.token_sha256) == 64
    assert plain not in dump and plain[4:] not in dump
    assert stored.last_used_at is not None
    assert plain not in repr(row)


def test_user_names_are_unique_and_admin_role(job_store: JobStore) -> None:
    admin = job_store.users.create_user("root", admin=True)
    assert admin.is_admin and admin.role == "admin"
    with pytest.raises(AlreadyExistsError):
        job_store.users.create_user("root")
    assert job_store.users.get_user_by_name("root").id == admin.id
    with pytest.raises(NotFoundError):
        job_store.users.get_user_by_name("nobody")
    assert job_store.users.count_users() == 1


def test_owner_isolation_everywhere(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    bob = job_store.users.create_user("bob")
    admin = job_store.users.create_user("admin", admin=True)
    dataset = job_store.datasets.create_dataset(alice, "chats")
    version = job_store.datasets.add_version(
        alice, dataset.id, sha256="0" * 64, format="jsonl", rows=10, storage_key="k"
    )
    model = job_store.base_models.register(alice, name="tiny", hub_id="org/tiny", revision="main")
    experiment = job_store.experiments.create(alice, name="lr sweep", hypothesis="lower lr helps")
    job = job_store.jobs.enqueue(
        alice,
        name="run",
        config=CONFIG,
        base_model_id=model.id,
        train_dataset_version_id=version.id,
        experiment_id=experiment.id,
    )

    attempts = [
        lambda: job_store.datasets.get_dataset(bob, dataset.id),
        lambda: job_store.datasets.get_version(bob, version.id),
        lambda: job_store.datasets.list_versions(bob, dataset.id),
        lambda: request_deletion(job_store, bob, "dataset", dataset.id),
        lambda: job_store.base_models.get(bob, model.id),
        lambda: job_store.experiments.get(bob, experiment.id),
        lambda: job_store.jobs.get(bob, job.id),
        lambda: job_store.jobs.request_cancel(bob, job.id),
        lambda: request_deletion(job_store, bob, "job", job.id),
        lambda: job_store.jobs.clone_with_changes(bob, job.id),
        lambda: job_store.telemetry.list_events(bob, job.id),
        lambda: job_store.telemetry.series(bob, job.id, "loss"),
        lambda: job_store.checkpoints.list_for_job(bob, job.id),
        # Bob cannot start a job on Alice's data either.
        lambda: job_store.jobs.enqueue(bob, name="x", config=CONFIG, train_dataset_version_id=version.id),
    ]
    for attempt in attempts:
        with pytest.raises(NotFoundError):
            attempt()
    assert job_store.jobs.list(bob).items == []
    assert job_store.datasets.list_datasets(bob) == []
    assert job_store.jobs.get(alice, job.id).state == JobState.QUEUED
    # An admin manages the queue (sees and can cancel any job) but does not read users' datasets.
    assert [j.id for j in job_store.jobs.list(admin).items] == [job.id]
    assert job_store.datasets.list_datasets(admin) == []
    for read in (
        lambda: job_store.datasets.get_dataset(admin, dataset.id),
        lambda: job_store.datasets.get_version(admin, version.id),
        lambda: job_store.datasets.list_versions(admin, dataset.id),
        lambda: request_deletion(job_store, admin, "dataset", dataset.id),
        lambda: job_store.jobs.enqueue(admin, name="x", config=CONFIG, train_dataset_version_id=version.id),
    ):
        with pytest.raises(NotFoundError):
            read()
    assert job_store.datasets.get_version(alice, version.id).id == version.id


def test_dataset_versions_number_up_and_test_set_access_is_logged(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    dataset = job_store.datasets.create_dataset(alice, "eval")
    with pytest.raises(AlreadyExistsError):
        job_store.datasets.create_dataset(alice, "eval")
    v1 = job_store.datasets.add_version(alice, dataset.id, sha256="a" * 64, format="jsonl", rows=3, storage_key="a")
    v2 = job_store.datasets.add_version(alice, dataset.id, sha256="b" * 64, format="csv", rows=4, storage_key="b")
    assert (v1.version, v2.version) == (1, 2)
    job_store.datasets.seal(alice, v2.id)
    job_store.datasets.set_reports(alice, v2.id, {"dedup": {"duplicates": 0}})
    job_store.datasets.record_test_set_access(alice, v2.id, purpose="final eval")
    refreshed = job_store.datasets.get_version(alice, v2.id)
    assert refreshed.sealed and refreshed.reports == {"dedup": {"duplicates": 0}}
    accesses = job_store.datasets.list_test_set_accesses(alice, v2.id)
    assert [(a.user_id, a.purpose) for a in accesses] == [(alice.id, "final eval")]
    receipt = request_deletion(job_store, alice, "dataset", dataset.id)
    assert {"where": "database", "what": "dataset versions", "count": 2, "bytes": 0} in receipt.removed
    with pytest.raises(NotFoundError):
        job_store.datasets.get_version(alice, v1.id)


def test_job_listing_filters_and_cursor_pages(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    created = [job_store.jobs.enqueue(alice, name=f"sweep-{i}", config=CONFIG) for i in range(7)]
    job_store.jobs.enqueue(alice, name="other", config=CONFIG)
    job_store.jobs.request_cancel(alice, created[0].id)

    seen: list[str] = []
    cursor = None
    while True:
        page = job_store.jobs.list(alice, name="SWEEP", limit=3, cursor=cursor)
        seen.extend(j.id for j in page.items)
        if page.next_cursor is None:
            break
        assert len(page.next_cursor) <= 40  # fits the API's query-parameter limit
        cursor = page.next_cursor
    assert seen == [j.id for j in reversed(created)]  # newest first, each exactly once
    cancelled = job_store.jobs.list(alice, state=JobState.CANCELLED).items
    assert [j.id for j in cancelled] == [created[0].id]
    assert len(job_store.jobs.list(alice, state=["queued", "cancelled"]).items) == 8
    assert job_store.jobs.list(alice, name="50%_").items == []
    with pytest.raises(IssueListError, match="cursor"):
        job_store.jobs.list(alice, cursor="not-a-cursor!")


def test_invalid_config_is_refused_naming_the_field(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    with pytest.raises(ConfigError, match="learning_rate"):
        job_store.jobs.enqueue(alice, name="bad", config={"learning_rate": -1})
    assert job_store.jobs.list(alice).items == []


def test_cancel_pause_resume_clone_delete(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    job = job_store.jobs.enqueue(alice, name="base", config=CONFIG, priority=3)
    with pytest.raises(StateTransitionError):
        job_store.jobs.request_pause(alice, job.id)  # a queued job has nothing to pause
    assert job_store.jobs.request_cancel(alice, job.id).state == JobState.CANCELLED
    with pytest.raises(StateTransitionError):
        job_store.jobs.request_cancel(alice, job.id)
    resumed = job_store.jobs.resume(alice, job.id)
    assert resumed.state == JobState.QUEUED and resumed.finished_at is None
    with pytest.raises(StateTransitionError):
        job_store.jobs.resume(alice, job.id)

    clone = job_store.jobs.clone_with_changes(alice, job.id, changes={"learning_rate": 3e-4}, name="faster")
    assert clone.id != job.id and clone.name == "faster" and clone.priority == 3
    assert clone.config["learning_rate"] == 3e-4 and clone.config["epochs"] == 1
    assert clone.cloned_from_id == job.id
    with pytest.raises(ConfigError, match="epochs"):
        job_store.jobs.clone_with_changes(alice, job.id, changes={"epochs": 0})

    claimed = claim_job(job_store, "w1", devices=0, lease_s=60)
    assert claimed is not None and claimed.job_id == job.id  # priority 3 beats the clone's... also 3, FIFO
    with pytest.raises(StateTransitionError):
        request_deletion(job_store, alice, "job", job.id)  # running
    assert job_store.jobs.request_pause(alice, job.id).state == JobState.PAUSING
    beat = job_store.queue.heartbeat(claimed.item_id, claimed.fencing_token, lease_s=60)
    assert beat and beat.requested_action == "pause"
    assert job_store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(JobState.PAUSED))
    assert job_store.jobs.get(alice, job.id).state == JobState.PAUSED
    request_deletion(job_store, alice, "job", job.id)
    with pytest.raises(NotFoundError):
        job_store.jobs.get(alice, job.id)


def test_events_and_metrics_are_idempotent(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    job = job_store.jobs.enqueue(alice, name="run", config=CONFIG)
    records = [
        {"type": "phase", "time": 1.0, "name": "training"},
        {"type": "metric", "time": 2.0, "step": 1, "loss": 2.5, "learning_rate": 1e-4},
        {"type": "metric", "time": 3.0, "step": 2, "loss": float("nan"), "learning_rate": 1e-4},
    ]
    events = [event_from_record(i, r) for i, r in enumerate(records)]
    points = [p for r in records for p in metric_points(r)]
    assert job_store.telemetry.append_events(job.id, 1, events) == 3
    assert job_store.telemetry.append_metrics(job.id, points) == 4
    # A re-tail after a crash replays the same lines: nothing is added.
    assert job_store.telemetry.append_events(job.id, 1, events) == 0
    assert job_store.telemetry.append_metrics(job.id, points) == 0
    # A new attempt's file starts at line 0 again without colliding.
    assert job_store.telemetry.append_events(job.id, 2, events[:1]) == 1

    stored = job_store.telemetry.list_events(alice, job.id)
    assert [(e.attempt, e.seq, e.type) for e in stored] == [
        (1, 0, "phase"),
        (1, 1, "metric"),
        (1, 2, "metric"),
        (2, 0, "phase"),
    ]
    assert stored[2].payload["loss"] == "nan"
    after = job_store.telemetry.list_events(alice, job.id, after_id=stored[1].id, types=["metric"])
    assert [e.seq for e in after] == [2]
    assert job_store.telemetry.metric_names(alice, job.id) == ["learning_rate", "loss"]
    loss = job_store.telemetry.series(alice, job.id, "loss")
    assert loss[0] == (1, 2.5) and loss[1][0] == 2 and math.isnan(loss[1][1])


def test_series_downsampling_keeps_endpoints_and_bounds_size(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    job = job_store.jobs.enqueue(alice, name="long", config=CONFIG)
    values = [(step, 10.0 / (1 + step) + (5.0 if step == 1234 else 0.0)) for step in range(3000)]
    job_store.telemetry.append_metrics(job.id, [MetricPoint("loss", s, v) for s, v in values])
    series = job_store.telemetry.series(alice, job.id, "loss", max_points=100)
    assert len(series) == 100
    assert series[0] == values[0] and series[-1] == values[-1]
    assert [s for s, _ in series] == sorted(s for s, _ in series)
    assert (1234, values[1234][1]) in series, "the spike must survive downsampling"
    # Read straight from the driver's cursor: the same points, as plain ints and floats.
    assert series == lttb(values, 100)
    assert all(type(step) is int and type(value) is float for step, value in series)
    window = job_store.telemetry.series(alice, job.id, "loss", max_points=1000, min_step=10, max_step=19)
    assert [s for s, _ in window] == list(range(10, 20))


def test_users_see_their_user_row(job_store: JobStore) -> None:
    alice = job_store.users.create_user("alice")
    with job_store.db.read() as session:
        assert session.get(User, alice.id) is not None
