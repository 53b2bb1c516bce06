"""Device-aware claiming without a GPU: declared fake device ids, and a stand-in engine that records its devices.

The stand-in replaces only the engine's command line; the worker launches it exactly as
it launches the engine (same environment, same supervision), so what it records is
what a training child would have been given.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner

from tests.waiting import HANG_S, wait_until
from tunedeck.cli.main import app
from tunedeck.core.settings import Settings
from tunedeck.core.states import JobState
from tunedeck.storage.factory import open_store
from tunedeck.store.models import Job
from tunedeck.store.store import JobStore
from tunedeck.worker import child_process
from tunedeck.worker.supervisor import Worker, build_context, detect_devices, parse_devices

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job

T = TypeVar("T")

# Records the devices it can see in `started.json` beside its spec, then runs until the test writes
# `release` there (bounded, so a test that never releases fails rather than hangs), records them
# again in `devices.json` and ends as a run that succeeded. The test, not a sleep, decides how long
# each run lasts, so "two at once" is a state it sets up, not a race it hopes to win.
STAND_IN_ENGINE = """
import json, os, sys, time
from pathlib import Path
attempt = Path(sys.argv[sys.argv.index("--spec") + 1]).parent
within = float(sys.argv[sys.argv.index("--release-within") + 1])
seen = {name: os.environ.get(name) for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")}
(attempt / "started.tmp").write_text(json.dumps(seen))
os.replace(attempt / "started.tmp", attempt / "started.json")
deadline = time.monotonic() + within
while not (attempt / "release").exists():
    if time.monotonic() > deadline:
        sys.exit("never released")
    time.sleep(0.02)
(attempt / "devices.json").write_text(json.dumps(seen))
"""


def test_parse_devices_reads_counts_and_ids() -> None:
    assert parse_devices("2") == ("0", "1")
    assert parse_devices("2", visible=("3", "5", "6")) == ("3", "5")
    assert parse_devices("0,1") == ("0", "1")
    assert parse_devices("3,") == ("3",)
    assert parse_devices("GPU-aa, GPU-bb") == ("GPU-aa", "GPU-bb")
    assert parse_devices("") == () and parse_devices("0") == ()
    with pytest.raises(ValueError, match="only 1 visible"):
        parse_devices("2", visible=("4",))
    with pytest.raises(ValueError, match="repeat"):
        parse_devices("1,1")


def test_detect_devices_prefers_the_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TUNEDECK_WORKER_DEVICES", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,-1,4")
    assert detect_devices() == ("2", "3")  # CUDA ignores everything from an invalid entry on
    monkeypatch.setenv("TUNEDECK_WORKER_DEVICES", "1")
    assert detect_devices(Settings().worker_devices) == ("2",)  # the setting: a count takes the first visible ids
    assert detect_devices("3,") == ("3",)  # --devices wins over the setting


def test_cli_refuses_a_bad_device_declaration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEDECK_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(app, ["worker", "--devices", "0,0"])
    assert result.exit_code == 2 and "repeat" in result.output
    assert not (tmp_path / "tunedeck.db").exists()  # refused before opening anything


def test_each_job_gets_its_own_device_and_gives_it_back(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        child_process,
        "engine_command",
        lambda spec, *_: [sys.executable, "-c", STAND_IN_ENGINE, "--spec", str(spec), "--release-within", str(HANG_S)],
    )
    monkeypatch.setenv("TUNEDECK_WORKER_DEVICES", "7,9")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    store = JobStore.open(sqlite_url)
    artifacts = open_store((tmp_path / "artifacts").as_uri())
    # The test reads the run folders after the jobs end: the worker's sweep keeps them.
    settings = Settings(data_dir=tmp_path / "data", database_url=sqlite_url, keep_run_folders_hours=24)
    ctx = build_context(settings, store=store, artifacts=artifacts, max_concurrent_jobs=3, worker_id="gpu-box")
    ctx.poll_s = ctx.heartbeat_s = 0.1
    assert ctx.devices == ("7", "9")
    user = store.users.create_user("alice")
    jobs = [
        seed_job(
            store,
            artifacts,
            tmp_path,
            chat_rows(2),
            config=TINY_JOB_CONFIG,
            user=user,
            name=f"gpu-{i}",
            devices_needed=1,
        ).job
        for i in range(3)
    ]
    worker = Worker(ctx)
    running_counts: list[int] = []

    def attempt(job: Job) -> Path:
        return ctx.runs_dir / job.id / "attempt-1"

    def started() -> list[Job]:
        return [job for job in jobs if (attempt(job) / "started.json").is_file()]

    def device_of(job: Job) -> str:
        return str(json.loads((attempt(job) / "started.json").read_text())["CUDA_VISIBLE_DEVICES"])

    def state(job: Job) -> JobState:
        return JobState(store.jobs.get(user, job.id).state)

    def drive(condition: Callable[[], T], what: str) -> T:
        """Run worker passes until `condition` holds, checking at each pass that no device is handed out twice."""

        def one_pass() -> T:
            worker.run_once()
            running_counts.append(len(worker.running_jobs))
            if running_counts[-1] == 2:
                assert worker.free_devices == ()  # a third job that needs a device must wait
            return condition()

        return wait_until(one_pass, what, poll_s=0.05)

    try:
        # Two start, and stay running until released: both run at once, on different devices.
        pair = drive(lambda: len(started()) >= 2 and started(), "two jobs to start")
        assert len(pair) == 2
        first, second = pair
        (third,) = [job for job in jobs if job not in pair]
        assert len(started()) == 2 and state(first) is state(second) is JobState.RUNNING
        assert not any((attempt(job) / "devices.json").exists() for job in pair)  # neither has finished
        assert {device_of(first), device_of(second)} == {"7", "9"}
        # Three slots, but no free device: the third stays queued however often the worker looks.
        for _ in range(3):
            assert not worker.run_once()
        assert state(third) is JobState.QUEUED and worker.free_devices == () and len(worker.running_jobs) == 2

        # Once the first ends, its device is given back and goes to the third, next to the second.
        (attempt(first) / "release").touch()
        drive(lambda: third in started(), "the third job to start on the freed device")
        assert state(first) is JobState.SUCCEEDED and state(second) is JobState.RUNNING
        assert device_of(third) == device_of(first) != device_of(second)

        (attempt(second) / "release").touch()
        (attempt(third) / "release").touch()
        # A job's state is written before its thread ends; its device is given back when the worker reaps it.
        drive(lambda: all(state(job).is_terminal for job in jobs) and not worker.running_jobs, "every job to end")
        for job in jobs:
            assert state(job) is JobState.SUCCEEDED, store.jobs.get(user, job.id).error_message
        assert max(running_counts) == 2  # three slots, but only two devices
        assert worker.free_devices == ("7", "9")  # every device given back

        runs: list[dict[str, Any]] = [json.loads((attempt(job) / "devices.json").read_text()) for job in jobs]
        for run in runs:
            assert run["CUDA_VISIBLE_DEVICES"] in ("7", "9")
            assert run["HIP_VISIBLE_DEVICES"] == run["CUDA_VISIBLE_DEVICES"]
    finally:
        # A failed check must not leave stand-ins waiting for a release (and the job threads with them).
        for job in started():
            (attempt(job) / "release").touch()
        store.close()
