"""The hygiene sweep: run folders go once their job is finished and committed, scratch and upload leftovers go.

The clock is passed in: every test moves it instead of waiting.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures.app import make_settings, start_harness
from tests.fixtures.job_claims import claim_job
from tests.waiting import HANG_S
from tunedeck.api.upload_sweeps import UploadSweeper
from tunedeck.cli.main import app
from tunedeck.core.states import JobState
from tunedeck.storage.factory import open_store
from tunedeck.store.models import Job, User
from tunedeck.store.records import ClaimedJob
from tunedeck.store.store import JobStore
from tunedeck.store.train_policy import JobEnd
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import Worker
from tunedeck.worker.sweeper import WorkerFolders, sweep_upload_leftovers, sweep_worker_folders

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


@pytest.fixture
def store(sqlite_url: str) -> Iterator[JobStore]:
    with JobStore.open(sqlite_url, migrate=False) as opened:
        yield opened


@pytest.fixture
def alice(store: JobStore) -> User:
    return store.users.create_user("alice")


def _claimed(store: JobStore, user: User, name: str = "job") -> ClaimedJob:
    job = store.jobs.enqueue(user, name=name, config={"epochs": 1})
    claimed = claim_job(store, "this-worker", devices=0, lease_s=600)
    assert claimed is not None and claimed.job_id == job.id
    return claimed


def _finished(store: JobStore, user: User, state: JobState = JobState.SUCCEEDED, *, commit: bool = True) -> Job:
    """A job that ran once, wrote a checkpoint (committed unless told otherwise) and ended in `state`."""
    claimed = _claimed(store, user)
    store.checkpoints.record_written(claimed.job_id, claimed.fencing_token, 2, f"users/x/ckpt-{claimed.job_id}")
    if commit:
        store.checkpoints.mark_committed(claimed.job_id, claimed.fencing_token, 2, "0" * 64)
    assert store.queue.finish(claimed.item_id, claimed.fencing_token, JobEnd(state))
    return store.jobs.get(user, claimed.job_id)


def _run_folder(runs: Path, job_id: str, attempt: int = 1) -> Path:
    folder = runs / job_id / f"attempt-{attempt}"
    (folder / "run").mkdir(parents=True)
    (folder / "run" / "events.jsonl").write_bytes(b"x" * 100)
    return folder


def _aged(path: Path, now: datetime, age: timedelta) -> Path:
    stamp = (now - age).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def _removed(report: object) -> list[str]:
    return sorted(item["what"] for item in report.removed)  # type: ignore[attr-defined]


def test_a_finished_committed_job_folder_goes_once_the_keep_time_is_over(
    store: JobStore, alice: User, tmp_path: Path
) -> None:
    job = _finished(store, alice)
    assert job.finished_at is not None
    _run_folder(tmp_path, job.id)
    folders = WorkerFolders(tmp_path, store)
    kept = sweep_worker_folders(folders, now=job.finished_at + HOUR, keep_run_hours=2)
    assert kept.removed == [] and (tmp_path / job.id).is_dir()
    report = sweep_worker_folders(folders, now=job.finished_at + 3 * HOUR, keep_run_hours=2)
    assert report.removed == [{"where": "runs", "what": str(tmp_path / job.id), "bytes": 100}]
    assert not (tmp_path / job.id).exists() and report.errors == []
    assert str(tmp_path / job.id) in report.summary() and "100 bytes" in report.summary()


def test_by_default_a_finished_job_folder_goes_right_away_whatever_its_end(
    store: JobStore, alice: User, tmp_path: Path
) -> None:
    jobs = [_finished(store, alice, state) for state in (JobState.FAILED, JobState.CANCELLED)]
    for job in jobs:
        _run_folder(tmp_path, job.id)
    report = sweep_worker_folders(WorkerFolders(tmp_path, store), now=datetime.now(UTC), keep_run_hours=0)
    assert _removed(report) == sorted(str(tmp_path / job.id) for job in jobs)


def test_a_folder_with_an_uncommitted_checkpoint_stays(store: JobStore, alice: User, tmp_path: Path) -> None:
    job = _finished(store, alice, JobState.FAILED, commit=False)
    _run_folder(tmp_path, job.id)
    report = sweep_worker_folders(WorkerFolders(tmp_path, store), now=datetime.now(UTC) + 100 * HOUR, keep_run_hours=0)
    assert report.removed == [] and (tmp_path / job.id).is_dir()


def test_a_running_jobs_folder_is_never_removed(store: JobStore, alice: User, tmp_path: Path) -> None:
    running = _claimed(store, alice, "running")
    _run_folder(tmp_path, running.job_id)
    # Its state is already written, but this worker's thread still runs it (final uploads).
    ending = _finished(store, alice)
    _run_folder(tmp_path, ending.id)
    later = datetime.now(UTC) + 100 * HOUR
    for folders in (WorkerFolders(tmp_path, store), WorkerFolders(tmp_path, store, frozenset({running.job_id}))):
        report = sweep_worker_folders(folders, now=later, keep_run_hours=0, dry_run=True)
        assert _removed(report) == [str(tmp_path / ending.id)]  # the running job, by the database or the worker
    mine = WorkerFolders(tmp_path, store, frozenset({running.job_id, ending.id}))
    assert sweep_worker_folders(mine, now=later, keep_run_hours=0).removed == []
    assert (tmp_path / running.job_id / "attempt-1").is_dir() and (tmp_path / ending.id).is_dir()


def test_a_deleted_jobs_folder_goes_and_other_entries_stay(store: JobStore, tmp_path: Path) -> None:
    gone = tmp_path / "job_0123456789abcdefghijklmnop"
    (gone / "attempt-1").mkdir(parents=True)
    (tmp_path / "fork-server-w.log").write_text("log")
    (tmp_path / "notes").mkdir()
    report = sweep_worker_folders(WorkerFolders(tmp_path, store), now=datetime.now(UTC), keep_run_hours=24)
    assert _removed(report) == [str(gone)]
    assert (tmp_path / "fork-server-w.log").is_file() and (tmp_path / "notes").is_dir()


def test_a_requeued_jobs_counted_attempts_go_but_a_newer_one_stays(
    store: JobStore, alice: User, tmp_path: Path
) -> None:
    claimed = _claimed(store, alice)
    assert store.queue.release(claimed.item_id, claimed.fencing_token) == JobState.QUEUED
    old = _run_folder(tmp_path, claimed.job_id, 1)
    starting = _run_folder(tmp_path, claimed.job_id, 2)  # another worker here claimed it meanwhile
    folders = WorkerFolders(tmp_path, store)
    assert sweep_worker_folders(folders, now=datetime.now(UTC), keep_run_hours=2).removed == []
    report = sweep_worker_folders(folders, now=datetime.now(UTC) + 3 * HOUR, keep_run_hours=2)
    assert _removed(report) == [str(old)] and starting.is_dir()


def test_work_scratch_folders_go_unless_their_item_runs(store: JobStore, alice: User, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    work = tmp_path / "work"
    item, _ = store.work.submit(alice, "preflight", {"x": 1})
    other, _ = store.work.submit(alice, "inspect", {"x": 2})
    claimed = store.queue.claim("elsewhere", ("inspect",), 0, 600)
    assert claimed is not None and claimed.item_id == other.id
    mine = work / f"preflight-{item.id}-abc"
    elsewhere = work / f"inspect-{other.id}-def"
    stale = work / "export-wi_0123456789abcdefghijklmnop-ghi"
    young_probe, old_probe = work / "ray-probe-young", work / "ray-probe-old"
    for folder in (mine, elsewhere, stale, young_probe, old_probe):
        folder.mkdir(parents=True)
    _aged(old_probe, now, 2 * HOUR)
    folders = WorkerFolders(tmp_path, store, running_work=frozenset({item.id}))
    report = sweep_worker_folders(folders, now=now, keep_run_hours=0)
    assert _removed(report) == sorted([str(stale), str(old_probe)])
    assert all(folder.is_dir() for folder in (mine, elsewhere, young_probe))


def test_upload_leftovers_go_only_after_an_hour(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    receiving = incoming / "upload-new.jsonl"
    receiving.write_bytes(b"r" * 10)
    _aged(receiving, now, timedelta(minutes=30))
    left = incoming / "upload-old.jsonl"
    left.write_bytes(b"l" * 20)
    _aged(left, now, 2 * HOUR)
    report = sweep_upload_leftovers(incoming, now=now)
    assert report.removed == [{"where": "uploads", "what": str(left), "bytes": 20}]
    assert receiving.is_file() and not left.exists()
    assert sweep_upload_leftovers(incoming, now=now + HOUR).removed[0]["what"] == str(receiving)
    assert sweep_upload_leftovers(tmp_path / "absent", now=now).removed == []


def test_a_dry_run_lists_the_same_things_and_removes_nothing(store: JobStore, alice: User, tmp_path: Path) -> None:
    now = datetime.now(UTC) + HOUR
    job = _finished(store, alice)
    _run_folder(tmp_path, job.id)
    (tmp_path / "work" / "generate-wi_0123456789abcdefghijklmnop-x").mkdir(parents=True)
    folders = WorkerFolders(tmp_path, store)
    dry = sweep_worker_folders(folders, now=now, keep_run_hours=0, dry_run=True)
    assert len(dry.removed) == 2 and "would remove" in dry.summary()
    assert all(Path(item["what"]).exists() for item in dry.removed)
    done = sweep_worker_folders(folders, now=now, keep_run_hours=0)
    assert done.removed == dry.removed
    assert not any(Path(item["what"]).exists() for item in done.removed)


def test_the_worker_sweeps_on_its_first_pass(store: JobStore, alice: User, tmp_path: Path) -> None:
    job = _finished(store, alice)
    folder = _run_folder(tmp_path / "runs", job.id)
    ctx = WorkerContext(
        worker_id="sweeper", store=store, artifacts=open_store((tmp_path / "artifacts").as_uri()),
        runs_dir=tmp_path / "runs", max_concurrent_jobs=0, max_concurrent_work=0, sweep_interval_s=600,
    )  # fmt: skip
    worker = Worker(ctx)
    worker.run_once()
    assert not folder.parent.exists()
    _run_folder(tmp_path / "runs", job.id)
    worker.run_once()  # the interval is not over and no job ended: no sweep
    assert (tmp_path / "runs" / job.id).is_dir()


def test_the_api_sweeps_uploads_from_a_thread_it_stops(tmp_path: Path) -> None:
    left = tmp_path / "upload-old.csv"
    left.write_text("a,b\n")
    sweeper = UploadSweeper(tmp_path, 600, clock=lambda: datetime.now(UTC) + 2 * HOUR).start()
    try:
        deadline = time.monotonic() + HANG_S
        while left.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not left.exists()
    finally:
        sweeper.stop()
    assert sweeper._thread is not None and not sweeper._thread.is_alive()


def test_the_sweep_command(tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(data))
    monkeypatch.setenv("TUNEDECK_DATABASE_URL", sqlite_url)
    gone = data / "runs" / "job_0123456789abcdefghijklmnop"
    gone.mkdir(parents=True)
    upload = data / "uploads" / "incoming" / "upload-1.jsonl"
    upload.parent.mkdir(parents=True)
    upload.write_text("{}\n")
    _aged(upload, datetime.now(UTC), 2 * HOUR)
    dry = CliRunner().invoke(app, ["sweep", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "Would remove 2 leftover(s)" in dry.output and gone.is_dir() and upload.is_file()
    done = CliRunner().invoke(app, ["sweep"])
    assert done.exit_code == 0, done.output
    assert "Removed 2 leftover(s)" in done.output and not gone.exists() and not upload.exists()


def test_the_server_sweeps_abandoned_uploads_when_it_starts(tmp_path: Path, sqlite_url: str) -> None:
    settings = make_settings(tmp_path, sqlite_url)
    incoming = settings.resolved_uploads_dir()
    incoming.mkdir(parents=True)
    left = _aged_file(incoming / "upload-killed.jsonl", 2 * HOUR)
    arriving = _aged_file(incoming / "upload-arriving.jsonl", timedelta(minutes=5))
    harness = start_harness(settings)
    next(harness)  # the app has started: its sweeper runs its first sweep at once
    try:
        deadline = time.monotonic() + HANG_S
        while left.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not left.exists() and arriving.is_file()
    finally:
        harness.close()
    assert not any(thread.name == "upload-sweeper" for thread in threading.enumerate())


def _aged_file(path: Path, age: timedelta) -> Path:
    path.write_text("{}\n")
    return _aged(path, datetime.now(UTC), age)


def test_the_worker_sweep_carries_out_retention_policies(store: JobStore, alice: User, tmp_path: Path) -> None:
    from sqlalchemy import update

    from tunedeck.core.errors import NotFoundError
    from tunedeck.store.models import Job as JobRow
    from tunedeck.store.retention import RetentionBounds

    bounds = RetentionBounds()
    old, recent = _finished(store, alice), _finished(store, alice)
    with store.db.write() as session:
        session.execute(update(JobRow).where(JobRow.id == old.id).values(finished_at=datetime.now(UTC) - 40 * DAY))
    store.retention.set_user_policy(alice, {"job_days": 30}, bounds)
    ctx = WorkerContext(
        worker_id="sweeper", store=store, artifacts=open_store((tmp_path / "artifacts").as_uri()),
        runs_dir=tmp_path / "runs", max_concurrent_jobs=0, max_concurrent_work=0, sweep_interval_s=600,
        retention=bounds,
    )  # fmt: skip
    Worker(ctx).run_once()
    with pytest.raises(NotFoundError):
        store.jobs.get(alice, old.id)
    assert store.jobs.get(alice, recent.id).id == recent.id
    (receipt,) = store.deletions.list_receipts(alice)
    assert (receipt.target_id, receipt.reason) == (old.id, "retention")
