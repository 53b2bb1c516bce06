"""API under load: `GET /api/v1/jobs` latency while exports and generations run, against the idle server.

    python benchmarks/api_under_load.py [--requests 500] [--repeats 3] [--exports 4] [--generations 4]

`tunedeck serve` runs in its own process on 127.0.0.1 (SQLite and local storage in a
scratch data dir, the embedded worker with `--work-slots` work slots, default 8). Through
its API a tiny Llama LoRA job is trained on CPU, committing a checkpoint every 2 steps.
Then, repetition by repetition (alternating which phase goes first), one client thread
sends sequential `GET /api/v1/jobs`, each as soon as the previous one answered:

- idle: `--requests` requests with nothing queued or running (the baseline);
- under load: `--exports` exports (distinct format and checkpoint, so none is
  deduplicated into an earlier one) and `--generations` generations (distinct prompts,
  base model side by side) are queued; the window opens when the first engine process
  runs and closes when every item has ended (at most `--max-load-requests` requests).

A sampler counts, every 100 ms, the work items queued and running and the engine
processes alive under the server, so the result shows that the load existed during
each window. Reported: p50, p95 and p99 of each phase (pooled over repetitions) and their
ratio, per-repetition ratios, and p99 under load against a 100 ms target. Writes
benchmarks/results/api_under_load.json + .png.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks.finished_job import build_tiny_model, train_finished_job
from benchmarks.harness import BenchmarkResult, Comparison, Measurement, percentile, write_result
from benchmarks.served_app import served_app
from benchmarks.work_load import EXPORT_FORMATS, InFlightSampler, export_bodies, submit_load, wait_for_items

TARGET_P99_MS = 100.0
WARMUP_REQUESTS = 20
FRACTIONS = {"p50": 0.50, "p95": 0.95, "p99": 0.99}


def timed_requests(
    client: httpx.Client, count: int, sampler: InFlightSampler, *, load_since: float | None = None,
    engines_seen: list[int] | None = None,
) -> list[float]:  # fmt: skip
    """Milliseconds of up to `count` sequential `GET /jobs`.

    With `load_since` (the `perf_counter` time the load was queued), requests stop once a
    sample taken after it finds nothing in flight. `engines_seen` gets the engine processes
    the newest sample counted as each request was sent.
    """
    latencies: list[float] = []
    for _ in range(count):
        latest = sampler.latest
        if load_since is not None and latest.at > load_since and latest.in_flight == 0 and latest.engines == 0:
            break  # everything ended: further requests would measure an idle server
        if engines_seen is not None:
            engines_seen.append(latest.engines)
        start = time.perf_counter()
        answer = client.get("/jobs")
        latencies.append((time.perf_counter() - start) * 1000)
        answer.raise_for_status()
    return latencies


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95 and p99 (nearest rank), rounded to 0.01 ms."""
    if not values:
        raise RuntimeError("no request was measured in this phase (the load ended before the first one?)")
    return {name: round(percentile(values, fraction), 2) for name, fraction in FRACTIONS.items()}


def checkpoints_needed(exports: int, repeats: int) -> int:
    """Committed checkpoints the job needs so that every repetition's exports are distinct (two spare)."""
    labels = math.ceil(exports * repeats / len(EXPORT_FORMATS))  # the final model is one label
    return max(2, labels + 1)


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="idle requests per repetition")
    parser.add_argument("--max-load-requests", type=int, default=50_000, help="bound on one load window")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--exports", type=int, default=4)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--work-slots", type=int, default=8, help="TUNEDECK_WORK_SLOTS of the server's worker")
    parser.add_argument("--results-dir", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    args = parse_arguments(argv)
    result = BenchmarkResult(
        "api_under_load", __doc__.splitlines()[0],
        parameters={key: value for key, value in vars(args).items() if key != "results_dir"} | {
            "database": "sqlite", "storage": "local", "route": "GET /api/v1/jobs"},
        packages=("fastapi", "uvicorn", "sqlalchemy", "torch", "transformers", "peft"),
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tunedeck-load-") as scratch:
        data_dir = Path(scratch) / "data"
        model_dir = build_tiny_model(data_dir / "models")  # the server's default model root
        environment = {
            "TUNEDECK_WORK_SLOTS": str(args.work_slots),
            "TUNEDECK_MAX_PENDING_WORK_PER_USER": str(args.exports + args.generations),
            "TUNEDECK_KEEP_CHECKPOINTS": "64",  # every checkpoint stays exportable
        }
        with served_app(data_dir, environment) as app, app.client() as client:
            job = train_finished_job(client, model_dir, checkpoints_needed(args.exports, args.repeats))
            result.checks["job"] = {"checkpoint_steps": list(job.steps), "train_seconds": job.train_seconds}
            with InFlightSampler(app.database_path, app.process.pid) as sampler:
                pooled, windows = measure(client, sampler, job.job_id, job.steps, args, result)
    p99 = next(comparison for comparison in result.comparisons if comparison.key == "get_jobs_p99")
    result.measurements.append(Measurement("get_jobs_p99_under_load", "GET /api/v1/jobs p99 under load", "ms",
                                           higher_is_better=False, target=TARGET_P99_MS,
                                           values=list(p99.candidate_values)))  # fmt: skip
    summary = summarize(pooled, windows)
    result.checks.update(summary)
    print_summary(summary)
    write_result(result, args.results_dir)
    return result


def measure(
    client: httpx.Client, sampler: InFlightSampler, job_id: str, steps: tuple[int, ...], args: argparse.Namespace,
    result: BenchmarkResult,
) -> tuple[dict[str, list[float]], list[dict[str, Any]]]:  # fmt: skip
    """Every repetition, idle and load phases alternating; adds the p50 and p99 comparisons to `result`.

    Returns every latency by phase and what each load window held.
    """
    plan = list(export_bodies(steps))
    if len(plan) < args.exports * args.repeats:
        raise RuntimeError(f"the job committed checkpoints {steps}: too few distinct exports")
    p50 = Comparison("get_jobs_p50", "GET /api/v1/jobs p50", "ms", "idle", "under load", higher_is_better=False)
    p99 = Comparison("get_jobs_p99", "GET /api/v1/jobs p99", "ms", "idle", "under load", higher_is_better=False)
    pooled: dict[str, list[float]] = {"idle": [], "load": []}
    windows: list[dict[str, Any]] = []
    sampler.wait_idle()
    timed_requests(client, WARMUP_REQUESTS, sampler)
    for repetition in range(args.repeats):
        figures: dict[str, list[float]] = {}
        order = ("idle", "load") if repetition % 2 == 0 else ("load", "idle")
        for phase in order:
            sampler.wait_idle()
            if phase == "idle":
                figures["idle"] = timed_requests(client, args.requests, sampler)
            else:
                exports = plan[repetition * args.exports : (repetition + 1) * args.exports]
                figures["load"], window = load_window(client, sampler, job_id, exports, args, repetition)
                windows.append(window)
        for phase, values in figures.items():
            pooled[phase] += values
        idle, load = percentiles(figures["idle"]), percentiles(figures["load"])
        for comparison, name in ((p50, "p50"), (p99, "p99")):
            comparison.baseline_values.append(idle[name])
            comparison.candidate_values.append(load[name])
            comparison.first.append("baseline" if order[0] == "idle" else "candidate")
        print(f"repetition {repetition + 1}: idle {idle} ms, under load {load} ms, in flight {windows[-1]}", flush=True)
    result.comparisons += [p50, p99]
    return pooled, windows


def load_window(
    client: httpx.Client, sampler: InFlightSampler, job_id: str, exports: list[dict[str, Any]],
    args: argparse.Namespace, repetition: int,
) -> tuple[list[float], dict[str, Any]]:  # fmt: skip
    """Queue the load, time requests from its first engine process to its end; the latencies and the window."""
    ids = submit_load(client, job_id, exports, args.generations, tag=f"r{repetition}",
                      max_new_tokens=args.max_new_tokens)  # fmt: skip
    queued = time.perf_counter()  # every item is committed: later samples see them until they end
    # The window opens when the work runs, not while it only waits for the worker's next claim.
    sampler.wait_started(since=queued)
    start = time.perf_counter()
    engines: list[int] = []
    latencies = timed_requests(client, args.max_load_requests, sampler, load_since=queued, engines_seen=engines)
    window: dict[str, Any] = {
        "repetition": repetition,
        "requests": len(latencies),
        "requests_sent_with_an_engine_running": sum(1 for count in engines if count > 0),
        "seconds": round(time.perf_counter() - start, 2),
        "latency_ms": percentiles(latencies),
        **sampler.window(start, time.perf_counter()),
    }
    window["items_ended"], window["errors"] = wait_for_items(client, ids)
    return latencies, window


def summarize(pooled: dict[str, list[float]], windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled percentiles of both phases, their ratios, and what was in flight in each load window."""
    idle, load = percentiles(pooled["idle"]), percentiles(pooled["load"])
    failed = sum(window["items_ended"].get("failed", 0) for window in windows)
    return {
        "latency_ms": {
            "idle": {**idle, "requests": len(pooled["idle"])},
            "under_load": {**load, "requests": len(pooled["load"])},
            "ratio": {name: round(load[name] / idle[name], 2) for name in FRACTIONS},
        },
        "target_p99_under_load_ms": TARGET_P99_MS,
        "p99_under_load_met": load["p99"] < TARGET_P99_MS,
        "load_windows": windows,
        "work_items_failed": failed,
    }


def print_summary(summary: dict[str, Any]) -> None:
    """The side-by-side table the benchmark exists for."""
    latency = summary["latency_ms"]
    idle, load, ratio = latency["idle"], latency["under_load"], latency["ratio"]
    print(f"\nGET /api/v1/jobs, pooled: idle n={idle['requests']}, under load n={load['requests']}")
    print(f"{'':6}{'idle':>12}{'under load':>14}{'ratio':>9}")
    for name in FRACTIONS:
        print(f"{name:6}{idle[name]:>9.2f} ms{load[name]:>11.2f} ms{ratio[name]:>8.2f}×")
    verdict = "met" if summary["p99_under_load_met"] else "NOT met"
    print(f"p99 under load {load['p99']:.1f} ms against a {TARGET_P99_MS:g} ms target: {verdict}")
    for window in summary["load_windows"]:
        print(f"load window {window['repetition'] + 1}: {window['requests']} requests in {window['seconds']} s "
              f"({window['requests_sent_with_an_engine_running']} sent while an engine process ran), "
              f"items in flight mean {window.get('in_flight_mean')} max {window.get('in_flight_max')}, "
              f"running mean {window.get('running_mean')} max {window.get('running_max')}, "
              f"engine processes mean {window.get('engine_processes_mean')} max {window.get('engine_processes_max')}, "
              f"ended {window['items_ended']}")  # fmt: skip
        for error in window["errors"]:
            print(f"  a {error['kind']} failed ({error['status']}): {error['detail'][:300]}")


if __name__ == "__main__":
    main()
