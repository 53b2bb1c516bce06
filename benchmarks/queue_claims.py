"""Claim latency of the job queue with 4 concurrent claimers, on SQLite and on PostgreSQL.

    python benchmarks/queue_claims.py [--jobs 400] [--claimers 4] [--repeats 3] [--postgres URL | --no-postgres]

Each repetition enqueues `--jobs` jobs into an empty database, then `--claimers`
threads (one store each, as separate workers would have) claim until the
queue is empty; every `claim` call is timed. Reported: p50 / p99 / max latency
in milliseconds and claims per second, per repetition and as medians, plus a
check that no job was claimed twice. Results (machine, versions, repetitions) go
to benchmarks/results/queue_claims.json (+ .png).

The p50 and p99 claim latencies of each database are measurements of their own (the summary
table shows both); max latency and claims/s stay in the per-database checks.

The issue names this script benchmarks/queue.py; it is queue_claims.py because a module named
queue.py in a script's own folder (sys.path[0]) shadows the standard `queue` module, which
asyncio and threading-based libraries import.

PostgreSQL: a fresh database is created on the server at 127.0.0.1:5432 (user
`postgres`) and dropped afterwards, unless `--postgres URL` names one to use.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import (
    BenchmarkResult,
    Measurement,
    add_database_arguments,
    on_postgres,
    percentile,
    write_result,
)
from tunedeck.core.states import WorkKind
from tunedeck.store.db import Database, truncate_all, upgrade_database
from tunedeck.store.store import JobStore


def run_once(url: str, jobs: int, claimers: int) -> dict[str, Any]:
    """Fill the queue, drain it with concurrent claimers, return latency statistics."""
    truncate_all(url)
    with JobStore.open(url, migrate=False) as store:
        owner = store.users.create_user(f"bench-{secrets.token_hex(3)}")
        for i in range(jobs):
            store.jobs.enqueue(owner, name=f"bench-{i}", config={"epochs": 1}, priority=i % 3)
    latencies: list[float] = []
    claimed: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(claimers)

    def claimer(index: int) -> None:
        worker_store = JobStore(Database.connect(url))  # its own connections, as a separate worker has
        queue = worker_store.queue
        mine: list[float] = []
        got: list[str] = []
        barrier.wait()
        while True:
            start = time.perf_counter()
            job = queue.claim(f"bench-worker-{index}", (WorkKind.TRAIN.value,), devices=0, lease_s=60)
            mine.append(time.perf_counter() - start)
            if job is None:
                break
            got.append(job.job_id)
        worker_store.close()
        with lock:
            latencies.extend(mine)
            claimed.extend(got)

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(claimers)]
    wall = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - wall
    millis = [x * 1000 for x in latencies]
    return {
        "claims": len(claimed),
        "duplicates": len(claimed) - len(set(claimed)),
        "p50_ms": percentile(millis, 0.50),
        "p99_ms": percentile(millis, 0.99),
        "max_ms": max(millis),
        "claims_per_s": len(claimed) / wall,
    }


def bench(url: str, label: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every repetition on one database, plus medians."""
    upgrade_database(url)
    reps = [run_once(url, args.jobs, args.claimers) for _ in range(args.repeats)]
    for rep in reps:
        print(f"{label:10s} p50 {rep['p50_ms']:7.2f} ms  p99 {rep['p99_ms']:7.2f} ms  "
              f"{rep['claims_per_s']:7.1f} claims/s  duplicates {rep['duplicates']}")  # fmt: skip
    keys = ("p50_ms", "p99_ms", "max_ms", "claims_per_s")
    return {
        "repetitions": reps,
        "median": {key: statistics.median(rep[key] for rep in reps) for key in keys},
        "all_claimed_once": all(rep["duplicates"] == 0 and rep["claims"] == args.jobs for rep in reps),
    }


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--claimers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    add_database_arguments(parser)
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    result = BenchmarkResult("queue_claims", __doc__.splitlines()[0],
                             parameters={"jobs": args.jobs, "claimers": args.claimers},
                             packages=("sqlalchemy", "psycopg", "alembic"))
    databases: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        databases["sqlite"] = bench(f"sqlite:///{Path(folder) / 'bench.db'}", "sqlite", args)
    postgres = on_postgres(args, result, lambda url: bench(url, "postgresql", args))
    if postgres is not None:
        databases["postgresql"] = postgres
    import sqlite3

    result.parameters["sqlite_version"] = sqlite3.sqlite_version
    for name, figures in databases.items():
        reps = figures["repetitions"]
        for quantile in ("p50", "p99"):
            result.measurements.append(Measurement(
                f"{name}_claim_{quantile}_ms", f"Queue claim {quantile} ({name}, {args.claimers} claimers)",
                "ms", higher_is_better=False, values=[rep[f"{quantile}_ms"] for rep in reps]))
        result.checks[name] = figures
    write_result(result, args.results_dir)
    return result


if __name__ == "__main__":
    main()
