"""A tiny CPU training run records host CPU and memory samples, and the job page shows them in its System section."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.fixtures.app import AppHarness, sign_in
from tunedeck.core.states import JobState
from tunedeck.engine.host.hardware import detect_hardware
from tunedeck.worker.context import WorkerContext
from tunedeck.worker.supervisor import Worker

from .seeding import TINY_JOB_CONFIG, chat_rows, seed_job
from .test_worker_runs_job import run_until_terminal


def test_a_cpu_run_records_system_samples_shown_on_its_page(
    web: AppHarness, tiny_llama_dir: Path, tmp_path: Path
) -> None:
    alice = web.users["alice"]
    seeded = seed_job(web.store, web.artifacts, tiny_llama_dir, chat_rows(16), config=TINY_JOB_CONFIG, user=alice)
    context = WorkerContext(
        worker_id="sampling-worker",
        store=web.store,
        artifacts=web.artifacts,
        runs_dir=tmp_path / "runs",
        lease_s=20.0,
        heartbeat_s=0.5,
        poll_s=0.1,
        system_sample_s=0.2,
    )
    state = run_until_terminal(Worker(context), web.store, alice, seeded.job.id)
    assert state is JobState.SUCCEEDED, web.store.jobs.get(alice, seeded.job.id).error_message

    rows = web.store.telemetry.list_events(alice, seeded.job.id, types=["system"])
    samples = [row.payload for row in rows]
    assert len(samples) >= 2  # at least the first and the last, however fast the run
    for sample in samples:
        assert isinstance(sample["cpu_percent"], float) and sample["cpu_percent"] >= 0
        assert 0 < sample["memory_used_mb"] <= sample["memory_total_mb"]
    if detect_hardware().backend == "cpu":
        assert not [key for sample in samples for key in sample if key.startswith("device_")]

    sign_in(web.client, web.tokens["alice"])
    page = web.client.get(f"/jobs/{seeded.job.id}")
    assert page.status_code == 200
    section = re.search(
        r'<section aria-labelledby="system-title" id="system" data-swap>(.*?)</section>', page.text, re.S
    )
    assert section is not None
    assert "Host CPU" in section.group(1) and "Host memory used" in section.group(1)
    assert 'data-system="cpu_percent"' in section.group(1)
    assert re.search(rf'<tr data-series="memory_used_mb">.*?<td>{len(samples)}</td></tr>', section.group(1))
    data = json.loads(re.search(r'id="job-data">(.*?)</script>', page.text, re.S).group(1))  # type: ignore[union-attr]
    assert len(data["system"]["cpu_percent"]) == len(samples)
    assert data["system"]["cpu_percent"][0][0] == 0.0  # seconds since the first sample
    assert data["system_origin"] == rows[0].time.isoformat()  # where the live points count from
