"""Dashboard render time on the server: a job page over long metric series, and the jobs list over many jobs.

    python benchmarks/dashboard.py [--points 100000] [--jobs 1000] [--repeats 7]

1. GET /jobs/<id> for a job whose four training series (loss, learning rate, gradient norm,
   tokens/s) each hold `--points` steps, plus one eval point every 100 steps. The page itself
   holds no series: its charts then read each one from the metrics API, downsampled on the
   server (LTTB, at most 2,000 points); those five reads are timed too, one after another.
2. GET /jobs with `--jobs` jobs in the database, each with metrics and a training phase
   event: the first page (50 jobs) with progress, ETA and best metric.

Measured in-process through the ASGI app (no network), after one warm-up request, on SQLite;
target: median under 300 ms each. Results (machine, versions, every repetition, medians) go
to benchmarks/results/dashboard.json.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

# This folder holds queue.py, which would shadow the standard `queue` module that asyncio needs:
# drop the folder (sys.path[0] for a script) and import from the repository root instead.
sys.path.pop(0)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient

from tunedeck.api.app import create_app
from tunedeck.core.settings import Settings
from tunedeck.jobs.records import MetricPoint, NewEvent
from tunedeck.jobs.store import JobStore
from tunedeck.web.job_view import CHART_POINTS

RESULTS = Path(__file__).resolve().parent / "results" / "dashboard.json"
TARGET_MS = 300.0
SERIES = ("loss", "learning_rate", "grad_norm", "tokens_per_second")


def _long_run(store: JobStore, user: Any, points: int) -> str:
    job = store.jobs.enqueue(user, name="long run", config={"epochs": 1})
    batch: list[MetricPoint] = []
    for step in range(1, points + 1):
        batch += [
            MetricPoint("loss", step, 2.0 * math.exp(-step / points) + 0.05 * math.sin(step)),
            MetricPoint("learning_rate", step, 5e-5 * (1 - step / points)),
            MetricPoint("grad_norm", step, 1.0 + 0.3 * math.cos(step / 7)),
            MetricPoint("tokens_per_second", step, 1000.0 + step % 97),
        ]
        if step % 100 == 0:
            batch.append(MetricPoint("eval_loss", step, 2.0 * math.exp(-step / points)))
        if len(batch) >= 20_000:
            store.telemetry.append_metrics(job.id, batch)
            batch = []
    store.telemetry.append_metrics(job.id, batch)
    store.telemetry.append_events(
        job.id, 1, [NewEvent(1, "phase", {"type": "phase", "name": "training", "total_steps": points})]
    )
    return job.id


def _many_jobs(store: JobStore, user: Any, count: int) -> None:
    for i in range(count):
        job = store.jobs.enqueue(user, name=f"sweep-{i:04d}", config={"learning_rate": 1e-5 * (1 + i % 10)})
        store.telemetry.append_metrics(
            job.id, [MetricPoint("loss", s, 1.0 / s) for s in range(1, 21)] + [MetricPoint("eval_loss", 20, 0.5)]
        )
        store.telemetry.append_events(
            job.id, 1, [NewEvent(1, "phase", {"type": "phase", "name": "training", "total_steps": 100})]
        )


def _sign_in(client: TestClient, token: str) -> None:
    page = client.get("/login")
    nonce = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert nonce is not None
    answer = client.post("/login", data={"token": token, "csrf_token": nonce.group(1)}, follow_redirects=False)
    assert answer.status_code == 303, answer.text


def _time(client: TestClient, path: str, repeats: int) -> dict[str, Any]:
    answer = client.get(path)  # warm-up: template compilation, first queries
    assert answer.status_code == 200, answer.status_code
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        answer = client.get(path)
        runs.append((time.perf_counter() - start) * 1000)
        assert answer.status_code == 200
    median = statistics.median(runs)
    return {
        "path": path.split("?")[0],
        "runs_ms": [round(r, 1) for r in runs],
        "median_ms": round(median, 1),
        "max_ms": round(max(runs), 1),
        "bytes": len(answer.content),
        "target_ms": TARGET_MS,
        "meets_target": median < TARGET_MS,
    }


def main() -> None:
    """Build the data, time both pages, write the results file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tunedeck-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'tunedeck.db'}"
        store = JobStore.open(url)
        owner = store.users.create_user("bench")
        token, _ = store.users.issue_token(owner)
        built = time.perf_counter()
        long_job = _long_run(store, owner, args.points)
        _many_jobs(store, owner, args.jobs - 1)
        setup_s = time.perf_counter() - built
        app = create_app(Settings(data_dir=Path(tmp) / "data", database_url=url), job_store=store)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            _sign_in(client, token)
            job_page = _time(client, f"/jobs/{long_job}", args.repeats)
            charts = {
                name: _time(client, f"/api/v1/jobs/{long_job}/metrics/{name}?points={CHART_POINTS}", args.repeats)
                for name in (*SERIES, "eval_loss")
            }
            jobs_list = _time(client, "/jobs", args.repeats)
        store.close()
    result = {
        "benchmark": "dashboard",
        "database": "sqlite",
        "points_per_series": args.points,
        "series": [*SERIES, "eval_loss"],
        "jobs": args.jobs,
        "setup_seconds": round(setup_s, 1),
        "job_page": job_page,
        "jobs_list": jobs_list,
        # Not a page render: each chart's own request after the page has loaded (target not applied).
        "chart_series_requests": {name: {k: v for k, v in r.items() if k not in ("target_ms", "meets_target")}
                                  for name, r in charts.items()},
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "processor": platform.processor() or platform.machine()},
        "versions": {name: metadata.version(name) for name in ("fastapi", "sqlalchemy", "jinja2", "starlette")},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for name in ("job_page", "jobs_list"):
        item = result[name]
        verdict = "meets" if item["meets_target"] else "MISSES"
        print(f"{name}: median {item['median_ms']} ms, max {item['max_ms']} ms ({verdict} {TARGET_MS:.0f} ms)")
    for name, item in result["chart_series_requests"].items():
        print(f"chart series {name}: median {item['median_ms']} ms")


if __name__ == "__main__":
    main()
