"""Dashboard server time: a job page over long metric series, its chart requests, and the jobs list.

    python benchmarks/dashboard.py [--points 100000] [--jobs 1000] [--repeats 7]
                                   [--postgres URL | --no-postgres]

1. GET /jobs/<id> for a job whose four training series (loss, learning rate, gradient norm,
   tokens/s) each hold `--points` steps, plus one eval point every 100 steps. The page itself
   holds no series: its charts then read each one from the metrics API, downsampled on the
   server (LTTB, at most 2,000 points).
2. Each of those five chart requests, timed one after another, each against the same target
   (a chart is part of what the page shows), and their sum per repetition: what a browser
   that fetched them one at a time would wait on top of the page.
3. GET /jobs with `--jobs` jobs in the database, each with metrics and a training phase
   event: the first page (50 jobs) with progress, ETA and best metric.

Measured in-process through the ASGI app (no network), after one warm-up request, on SQLite
and, when a server answers at 127.0.0.1:5432 (user `postgres`, trust auth), on a scratch
PostgreSQL database created and dropped by this script. Target: median under 300 ms for the
page, the list and each chart request. Results (machine, CPU count, load average, versions,
every repetition, medians) go to benchmarks/results/dashboard.json + .png via the harness.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient

from benchmarks.harness import BenchmarkResult, Measurement, add_database_arguments, on_postgres, write_result
from tunedeck.api.app import create_app
from tunedeck.core.settings import Settings
from tunedeck.store.records import MetricPoint, NewEvent
from tunedeck.store.store import JobStore
from tunedeck.web.job_view import CHART_POINTS

TARGET_MS = 300.0
SERIES = ("loss", "learning_rate", "grad_norm", "tokens_per_second")
CHARTS = (*SERIES, "eval_loss")


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


def _request_ms(client: TestClient, path: str) -> float:
    start = time.perf_counter()
    answer = client.get(path)
    elapsed = (time.perf_counter() - start) * 1000
    assert answer.status_code == 200, (path, answer.status_code)
    return elapsed


def measure_database(url: str, label: str, scratch: Path, args: argparse.Namespace) -> list[Measurement]:
    """Fill one database, then time the page, each chart request (and their sum) and the jobs list."""
    store = JobStore.open(url)
    try:
        owner = store.users.create_user("bench")
        token, _ = store.users.issue_token(owner)
        built = time.perf_counter()
        long_job = _long_run(store, owner, args.points)
        _many_jobs(store, owner, args.jobs - 1)
        print(f"{label}: built {args.points:,} points x {len(CHARTS)} series and {args.jobs} jobs "
              f"in {time.perf_counter() - built:.1f} s", flush=True)
        app = create_app(Settings(data_dir=scratch / f"data-{label}", database_url=url), job_store=store)
        paths = {"job_page": f"/jobs/{long_job}", "jobs_list": "/jobs",
                 **{f"chart_{name}": f"/api/v1/jobs/{long_job}/metrics/{name}?points={CHART_POINTS}"
                    for name in CHARTS}}
        times: dict[str, list[float]] = {key: [] for key in paths}
        with TestClient(app, base_url="http://127.0.0.1") as client:
            _sign_in(client, token)
            for path in paths.values():
                _request_ms(client, path)  # warm-up: template compilation, first queries
            for _ in range(args.repeats):
                for key, path in paths.items():
                    times[key].append(_request_ms(client, path))
    finally:
        store.close()
    chart_keys = [f"chart_{name}" for name in CHARTS]
    charts_sum = [sum(values) for values in zip(*(times[key] for key in chart_keys), strict=True)]

    def measurement(key: str, title: str, values: list[float], target: float | None = TARGET_MS) -> Measurement:
        return Measurement(f"{label}_{key}_ms", f"{title} ({label})", "ms", higher_is_better=False,
                           target=target, values=[round(v, 2) for v in values])

    out = [measurement("job_page", "Job page, long run", times["job_page"])]
    out += [measurement(key, f"Chart series request {key.removeprefix('chart_')}", times[key]) for key in chart_keys]
    out.append(measurement("jobs_list", "Jobs list page", times["jobs_list"]))
    # The five requests together: reported, no target of its own (each request has one).
    out.append(measurement("charts_sum", "Sum of the five chart requests", charts_sum, None))
    return out


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Build the data on each database, time the pages and chart requests, write the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    add_database_arguments(parser)
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    result = BenchmarkResult("dashboard", __doc__.splitlines()[0],
                             parameters={"points_per_series": args.points, "series": list(CHARTS),
                                         "jobs": args.jobs, "chart_points": CHART_POINTS,
                                         "target_ms": TARGET_MS},
                             packages=("fastapi", "sqlalchemy", "jinja2", "starlette", "psycopg"))
    with tempfile.TemporaryDirectory(prefix="tunedeck-bench-") as tmp:
        scratch = Path(tmp)
        result.measurements += measure_database(f"sqlite:///{scratch / 'tunedeck.db'}", "sqlite", scratch, args)
        result.measurements += on_postgres(
            args, result, lambda url: measure_database(url, "postgresql", scratch, args)) or []
    write_result(result, args.results_dir)
    return result


if __name__ == "__main__":
    main()
