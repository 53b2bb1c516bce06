"""Ingestion memory: an upload of a million short rows, through a real server and its worker.

    python benchmarks/ingest_memory.py [--rows 1000000]

`tunedeck serve` with one embedded worker runs in a subprocess on loopback (SQLite, local
storage; `benchmarks.served_app`). The benchmark uploads a JSONL file of `--rows` rows of 20 random letters and waits
for the ingestion to end, sampling every 50 ms the resident memory of the server process
(the API and the worker's threads) and of each process the worker starts (the ingestion
runs in one). Figures:

- peak memory of the ingestion process above the same process idle (its interpreter and
  imports, measured by an ingestion of a one-row file). Target: under 400 MB;
- growth of the server process from before the upload to after it (target: none beyond
  allocator noise, 50 MB);
- the baseline, side by side: the same file read the way uploads were processed before
  (every row in memory, `load_dataset` then `find_duplicates` with its in-memory LSH index),
  in a process of its own, peak memory and time.

Writes benchmarks/results/ingest_memory.json.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Comparison, Measurement, write_result
from benchmarks.served_app import served_app

MB = 1024 * 1024
SAMPLE_S = 0.05
# The pre-worker ingestion, run as its own process so its peak is its own.
BASELINE = """
import sys, time
from pathlib import Path
from tunedeck.data.loading import load_dataset
from tunedeck.data.dedup import find_duplicates
from tunedeck.data.scan_policy import scan_rows
started = time.monotonic()
loaded = load_dataset(Path(sys.argv[1]))
report = find_duplicates({"train": loaded})
scan_rows(loaded.rows[:20000], loaded.line_numbers[:20000])
print(time.monotonic() - started, report.counts()["exact_within"], flush=True)
"""


def write_rows(path: Path, rows: int, seed: int) -> None:
    """`rows` JSONL rows, each a text of 20 random letters."""
    rng = random.Random(seed)
    letters = string.ascii_lowercase
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(rows):
            handle.write(json.dumps({"text": "".join(rng.choices(letters, k=20))}) + "\n")


class MemorySampler:
    """Peak resident memory of a process and, separately, of each of its descendants, sampled on a thread."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.root_peak = 0
        self.child_peaks: dict[int, int] = {}
        self.child_names: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.root_peak = max(self.root_peak, self.root.memory_info().rss)
                for child in self.root.children(recursive=True):
                    try:
                        rss = child.memory_info().rss
                        self.child_names.setdefault(child.pid, " ".join(child.cmdline()[1:4]))
                    except psutil.Error:
                        continue
                    self.child_peaks[child.pid] = max(self.child_peaks.get(child.pid, 0), rss)
            except psutil.Error:
                pass
            time.sleep(SAMPLE_S)

    def ingestion_peak(self) -> int:
        """The largest peak among the ingestion processes seen."""
        peaks = [peak for pid, peak in self.child_peaks.items() if "ingestion" in self.child_names.get(pid, "")]
        return max(peaks, default=0)


def upload(client: httpx.Client, path: Path, name: str) -> dict[str, Any]:
    """Upload `path` and wait for its ingestion to end; the ended work item."""
    with open(path, "rb") as handle:
        answer = client.post("/datasets", files={"file": (path.name, handle)}, data={"name": name})
    answer.raise_for_status()
    item = answer.json()
    while item["state"] not in ("succeeded", "failed", "cancelled"):
        item = client.get(f"/work/{item['id']}", params={"wait": 60}).json()
    if item["state"] != "succeeded":
        raise RuntimeError(f"the ingestion of {path.name} ended {item['state']}: {item.get('error')}")
    return dict(item)


def baseline_run(path: Path) -> tuple[float, float]:
    """Peak RSS (MB) and seconds of the in-memory ingestion on `path`, in a process of its own."""
    process = subprocess.Popen([sys.executable, "-c", BASELINE, str(path)], stdout=subprocess.PIPE, text=True)
    peak = 0
    handle = psutil.Process(process.pid)
    while process.poll() is None:
        try:
            peak = max(peak, handle.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(SAMPLE_S)
    out, _ = process.communicate()
    if process.returncode != 0:
        raise RuntimeError("the baseline ingestion failed")
    return peak / MB, float(out.split()[0])


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-baseline", action="store_true", help="leave out the in-memory baseline run")
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    result = BenchmarkResult("ingest_memory", __doc__.splitlines()[0], parameters={"rows": args.rows},
                             packages=("datasketch", "numpy", "fastapi"))  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        big, tiny = folder / "rows.jsonl", folder / "one.jsonl"
        write_rows(big, args.rows, args.seed)
        write_rows(tiny, 1, args.seed + 1)
        environment = {"TUNEDECK_MAX_UPLOAD_ROWS": str(args.rows), "TUNEDECK_MAX_UPLOAD_BYTES": str(1 << 31)}
        with served_app(folder / "data", environment) as app, app.client(timeout_s=180) as client:
            server = psutil.Process(app.process.pid)
            with MemorySampler(server.pid) as idle:
                upload(client, tiny, "one-row")
            server_before = server.memory_info().rss
            started = time.monotonic()
            with MemorySampler(server.pid) as busy:
                item = upload(client, big, "million")
            seconds = time.monotonic() - started
            time.sleep(2)
            server_after = server.memory_info().rss
        idle_mb, peak_mb = idle.ingestion_peak() / MB, busy.ingestion_peak() / MB
        result.measurements.append(Measurement(
            "ingestion_peak_above_idle_mb", "Ingestion process peak above the same process idle", "MB",
            higher_is_better=False, target=400, values=[peak_mb - idle_mb],
        ))  # fmt: skip
        result.measurements.append(Measurement(
            "server_growth_mb", "Server process growth across the upload", "MB",
            higher_is_better=False, target=50, values=[(server_after - server_before) / MB],
        ))  # fmt: skip
        result.checks.update(
            ingestion={"seconds": round(seconds, 1), "peak_mb": round(peak_mb, 1), "idle_mb": round(idle_mb, 1),
                       "rows": item["result"]["rows"], "file_mb": round(big.stat().st_size / MB, 1)},
            server={"before_mb": round(server_before / MB, 1), "after_mb": round(server_after / MB, 1),
                    "peak_mb": round(busy.root_peak / MB, 1)},
        )  # fmt: skip
        if not args.skip_baseline:
            base_peak, base_seconds = baseline_run(big)
            memory = Comparison("peak_memory_mb", "Peak memory of the ingestion (whole process)", "MB",
                                baseline_label="in memory (before)", candidate_label="streaming on a worker",
                                higher_is_better=False, baseline_values=[base_peak], candidate_values=[peak_mb],
                                first=["baseline"])  # fmt: skip
            result.comparisons.append(memory)
            result.checks["baseline"] = {"peak_mb": round(base_peak, 1), "seconds": round(base_seconds, 1)}
    print(json.dumps(result.checks, indent=1))
    write_result(result, args.results_dir)
    return result


if __name__ == "__main__":
    main()
