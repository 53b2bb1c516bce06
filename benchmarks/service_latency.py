"""Service: enqueue-to-running latency of the embedded worker (what `tunedeck serve` runs).

    python benchmarks/service_latency.py [--jobs 40]

A worker built from settings exactly as `serve` builds it (`build_context`, SQLite and local
storage in a scratch data dir, default poll interval) runs `Worker.run_forever` in a thread.
Jobs are enqueued one at a time, at random moments relative to the worker's poll loop;
each job's latency is its `started_at - queued_at` in the database (both stamped by the
store, so one clock). The jobs name no dataset, so each attempt fails at input preparation
right after the claim: the figure is the queue and the claim loop, not training.
Target: p50 under 1 s. Writes benchmarks/results/service_latency.json + .png.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Measurement, percentile, write_result


def job_row(store: Any, job_id: str) -> tuple[Any, Any, str]:
    """`queued_at`, `started_at` and state of one job, read straight from its row."""
    from tunedeck.store.models import Job

    with store.db.read() as session:
        job = session.get(Job, job_id)
        return job.queued_at, job.started_at, job.state


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    from tunedeck.core.settings import Settings
    from tunedeck.store.store import JobStore
    from tunedeck.worker.supervisor import build_context, start_embedded_worker

    rng = random.Random(args.seed)
    latencies: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(data_dir=Path(scratch))
        store = JobStore.open(settings.resolved_database_url())
        ctx = build_context(settings, store=store)
        result = BenchmarkResult("service_latency", __doc__.splitlines()[0],
                                 parameters={"jobs": args.jobs, "database": "sqlite", "poll_s": ctx.poll_s},
                                 packages=("sqlalchemy", "fastapi"))
        owner = store.users.create_user("bench")
        thread = start_embedded_worker(ctx)
        try:
            for index in range(args.jobs):
                time.sleep(rng.uniform(0.0, 2 * ctx.poll_s))  # land anywhere in the poll cycle
                job = store.jobs.enqueue(owner, name=f"latency-{index}", config={"epochs": 1})
                deadline = time.monotonic() + 30
                while True:
                    queued, started, _ = job_row(store, job.id)
                    if started is not None:
                        break
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"job {job.id} was not claimed within 30 s")
                    time.sleep(0.01)
                latencies.append((started - queued).total_seconds())
                while job_row(store, job.id)[2] == "running":  # one job at a time: no queueing behind another
                    time.sleep(0.01)
        finally:
            ctx.stop.set()
            thread.join(timeout=30)
            store.close()
    result.measurements.append(Measurement("enqueue_to_running_p50", "Enqueue to running (p50)", "s",
                                           higher_is_better=False, target=1.0, values=latencies))
    result.checks["latency_s"] = {"p50": percentile(latencies, 0.5), "p90": percentile(latencies, 0.9),
                                  "p99": percentile(latencies, 0.99), "max": max(latencies)}
    write_result(result, args.results_dir)
    return result


if __name__ == "__main__":
    main()
