"""Device-aware claiming without a GPU: declared fake device ids, and a stand-in engine that records its devices.

The stand-in replaces only the engine's command line; the worker launches it exactly as
it launches the engine (same environment, same supervision), so what it records is
what a training child would have been given.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tunedeck.cli.main import app
from tunedeck.core.settings import Settings
from tunedeck.core.states import JobState
from tunedeck.jobs.store import JobStore
from tunedeck.storage.factory import open_store
from tunedeck.worker import child_process
from tunedeck.worker.supervisor import Worker, build_context, detect_devices, parse_devices

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job

# Records the devices it can see and when it ran, beside its spec, then ends as a run that succeeded.
STAND_IN_ENGINE = """
import json, os, sys, time
from pathlib import Path
spec = Path(sys.argv[sys.argv.index("--spec") + 1])
seen = {name: os.environ.get(name) for name in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")}
started = time.time()
time.sleep(1.5)
(spec.parent / "devices.json").write_text(json.dumps({**seen, "start": started, "end": time.time()}))
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
    assert detect_devices() == ("2",)  # a count takes the first visible ids
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
        child_process, "engine_command", lambda spec: [sys.executable, "-c", STAND_IN_ENGINE, "--spec", str(spec)]
    )
    monkeypatch.setenv("TUNEDECK_WORKER_DEVICES", "7,9")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    store = JobStore.open(sqlite_url)
    artifacts = open_store((tmp_path / "artifacts").as_uri())
    settings = Settings(data_dir=tmp_path / "data", database_url=sqlite_url)
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
    most_running = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        worker.run_once()
        most_running = max(most_running, len(worker.running_jobs))
        if len(worker.running_jobs) == 2:
            assert worker.free_devices == ()  # a third job that needs a device must wait
        if all(JobState(store.jobs.get(user, job.id).state).is_terminal for job in jobs):
            break
        time.sleep(0.05)
    for job in jobs:
        assert store.jobs.get(user, job.id).state == JobState.SUCCEEDED.value
    assert most_running == 2  # three slots, but only two devices
    assert worker.free_devices == ("7", "9")  # every device given back

    runs: list[dict[str, Any]] = [
        json.loads((ctx.runs_dir / job.id / "attempt-1" / "devices.json").read_text()) for job in jobs
    ]
    for run in runs:
        assert run["CUDA_VISIBLE_DEVICES"] in ("7", "9")
        assert run["HIP_VISIBLE_DEVICES"] == run["CUDA_VISIBLE_DEVICES"]
    for index, run in enumerate(runs):
        for other in runs[index + 1 :]:
            if run["start"] < other["end"] and other["start"] < run["end"]:
                assert run["CUDA_VISIBLE_DEVICES"] != other["CUDA_VISIBLE_DEVICES"], (run, other)
    assert len({run["CUDA_VISIBLE_DEVICES"] for run in runs[:2]}) == 2  # the first two ran side by side
    store.close()
