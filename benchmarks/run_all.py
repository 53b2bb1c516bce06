"""Every benchmark, one after another, then the summary table (`make bench`).

    python benchmarks/run_all.py [--only packing,overhead] [--quick] [--gpu] [--summary-only]

Each benchmark runs in its own process (`python -m benchmarks.<name>`), so one that fails
is reported and the others still run; results go to benchmarks/results/<name>.json and
.png. The summary, benchmarks/results/summary.md, is built from whatever JSON files are
there, with the machine and its load average, for the README to include. `--quick` runs
smaller sizes (a smoke test of the whole chain, not figures to publish). `--gpu` adds
benchmarks/gpu/train_throughput.py (needs a CUDA GPU) and benchmarks/gpu/distributed_throughput.py
(single-device arms on one GPU; the DDP and FSDP arms need two or more) and
benchmarks/gpu/peers_throughput.py (tunedeck's fast paths beside TRL's and LLaMA-Factory's GPU settings).
`peers` (tunedeck against TRL and LLaMA-Factory on CPU) creates LLaMA-Factory's own virtual
environment under benchmarks/.peers/ the first time (minutes); without it, its other arms run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

# name → (module, full-size arguments, quick arguments)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "packing": ("benchmarks.packing", [], ["--rows", "160", "--repeats", "1"]),
    "packed_attention": ("benchmarks.packed_attention", [], ["--rows", "96", "--repeats", "1", "--vocab", "8000"]),
    "overhead": ("benchmarks.overhead", [], ["--rows", "96", "--repeats", "1"]),
    "torch_compile": ("benchmarks.torch_compile", [], ["--rows", "48", "--epochs", "1", "--repeats", "1"]),
    "cross_entropy": ("benchmarks.cross_entropy", [], ["--rows", "32", "--repeats", "1", "--vocab", "8000"]),
    "data_prep": ("benchmarks.data_prep", [], ["--rows", "2000", "--repeats", "1"]),
    "checkpoint_stall": ("benchmarks.checkpoint_stall", [], ["--rows", "80", "--repeats", "1"]),
    "service_latency": ("benchmarks.service_latency", [], ["--jobs", "8"]),
    "ingest_memory": ("benchmarks.ingest_memory", [], ["--rows", "20000"]),
    "queue_claims": ("benchmarks.queue_claims", [], ["--jobs", "40", "--repeats", "1"]),
    "dashboard": ("benchmarks.dashboard", [], ["--points", "10000", "--jobs", "100", "--repeats", "3"]),
    "chart_points": ("benchmarks.chart_points", [], ["--points", "20000", "--repeats", "1"]),
    "engine_start": ("benchmarks.engine_start", [], ["--repeats", "1"]),
    "api_under_load": ("benchmarks.api_under_load", [], ["--requests", "100", "--repeats", "1"]),
    "encrypted_commit": ("benchmarks.encrypted_commit", [], ["--total-mib", "32", "--repeats", "1"]),
    "peers": ("benchmarks.peers", [], ["--rows", "48", "--repeats", "1", "--modes", "full"]),
}
GPU_BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "gpu_train_throughput": ("benchmarks.gpu.train_throughput", [], ["--steps", "10", "--warmup", "3"]),
    "gpu_distributed_throughput": ("benchmarks.gpu.distributed_throughput", [], ["--steps", "10", "--warmup", "5"]),
    "gpu_peers_throughput": ("benchmarks.gpu.peers_throughput", [], ["--steps", "8", "--warmup", "2"]),
}


def run_benchmark(name: str, module: str, arguments: list[str]) -> dict[str, Any]:
    """Run one benchmark in its own process; its outcome for the log."""
    print(f"\n### {name}: python -m {module} {' '.join(arguments)}", flush=True)
    started = time.monotonic()
    code = subprocess.call([sys.executable, "-m", module, *arguments], cwd=ROOT)
    return {"name": name, "exit_code": code, "seconds": round(time.monotonic() - started, 1)}


def summary_rows(result: dict[str, Any]) -> list[list[str]]:
    """Table rows of one result file (the harness format)."""
    name = result.get("benchmark", "?")
    rows = []
    for comparison in result.get("comparisons", []):
        rows.append([name, comparison["title"], _number(comparison.get("median_baseline"), comparison["unit"]),
                     _number(comparison.get("median_candidate"), comparison["unit"]),
                     f"{comparison['median_ratio']:.3g}×" if comparison.get("median_ratio") is not None else "—",
                     comparison.get("target", "—"), _met(comparison.get("met"))])
    for measurement in result.get("measurements", []):
        rows.append([name, measurement["title"], "", _number(measurement.get("median"), measurement["unit"]),
                     "", measurement.get("target", "—"), _met(measurement.get("met"))])
    exactness = result.get("checks", {}).get("exactness")
    if isinstance(exactness, dict):
        rows.append([name, "Packed vs unpacked per-token loss (fp32)", "", f"{exactness['max_abs_difference']:.2g}",
                     "", f"≤ {exactness['tolerance']:g}", _met(exactness.get("exact"))])
    syncs = result.get("checks", {}).get("host_syncs")
    if isinstance(syncs, dict):
        rows.append([name, "Device reads per plain step", _number(syncs["baseline"].get(
            "median_device_reads_per_plain_step"), ""), _number(syncs["tunedeck"].get(
                "median_device_reads_per_plain_step"), ""), "", "≤ baseline",
            _met(syncs.get("tunedeck_within_baseline_on_plain_steps"))])
    return rows


def write_summary(results_dir: Path, log: list[dict[str, Any]]) -> Path:
    """benchmarks/results/summary.md from every result JSON in `results_dir`."""
    results = []
    for path in sorted(results_dir.glob("*.json")):
        try:
            results.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    header = ["benchmark", "figure", "baseline", "tunedeck", "ratio", "target", "met"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    machines, loads = set(), []
    for result in results:
        for row in summary_rows(result):
            lines.append("| " + " | ".join(row) + " |")
        machine = result.get("machine") or {}
        if machine.get("cpus"):
            machines.add(f"{machine.get('processor') or 'unknown CPU'}, {machine.get('cpus')} CPUs, "
                         f"Python {machine.get('python')}, {machine.get('platform')}")
        load = (result.get("load_average") or {}).get("before")
        if load:
            loads.append(f"{result.get('benchmark')} {load[0]:.1f}")
    lines.append("")
    lines.append(f"Measured on: {'; '.join(sorted(machines)) or 'unknown'}.")
    if loads:
        lines.append(f"1-minute load average when each started: {', '.join(loads)}.")
    failed = [entry for entry in log if entry["exit_code"] != 0]
    if failed:
        names = ", ".join(f"{entry['name']} (exit {entry['exit_code']})" for entry in failed)
        lines.append(f"Failed in this run: {names}.")
    path = results_dir / "summary.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _number(value: Any, unit: str) -> str:
    if value is None:
        return "—"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def _met(value: Any) -> str:
    return "—" if value is None else ("yes" if value else "**no**")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks asked for, write the summary; exit 1 if any benchmark failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help=f"comma-separated subset of {', '.join(BENCHMARKS)}")
    parser.add_argument("--quick", action="store_true", help="small sizes: checks the chain, figures not for use")
    parser.add_argument("--gpu", action="store_true", help="also run the benchmarks in benchmarks/gpu/")
    parser.add_argument("--summary-only", action="store_true", help="rebuild summary.md from the JSON files")
    args = parser.parse_args(argv)
    chosen = dict(BENCHMARKS)
    if args.gpu:
        chosen.update(GPU_BENCHMARKS)
    if args.only:
        wanted = [name.strip() for name in args.only.split(",")]
        unknown = sorted(set(wanted) - set(chosen))
        if unknown:
            parser.error(f"unknown benchmark(s) {unknown}")
        chosen = {name: chosen[name] for name in wanted}
    log = []
    if not args.summary_only:
        for name, (module, full, quick) in chosen.items():
            log.append(run_benchmark(name, module, quick if args.quick else full))
    path = write_summary(RESULTS, log)
    print(f"\n{path.read_text(encoding='utf-8')}\nwrote {path}")
    for entry in log:
        print(f"{entry['name']}: exit {entry['exit_code']} in {entry['seconds']} s")
    return 1 if any(entry["exit_code"] for entry in log) else 0


if __name__ == "__main__":
    sys.exit(main())
