"""Overhead: time per optimizer step of tunedeck's `run_training` against a plain Trainer script.

    python benchmarks/overhead.py [--rows 160] [--repeats 5] [--layers 4] [--width 256]

Same model, data and config as benchmarks/packing.py but without packing, so both sides
pad each batch to its longest example and run the same steps: what is left is tunedeck's
own cost (callbacks, events, the speed monitor, the first-step parameter check).
Both sides follow the same hyperparameters and seed, so they train the same batches in
the same order (the logged losses are recorded to show it). Time per step is the
training loop's time (first hook to last) over its steps. The figure judged against the
target is this process's CPU time per step with one torch thread (`--threads`), which
other processes on a shared machine do not inflate; wall time per step is recorded beside
it, and so is the per-step median wall time (benchmarks/lm_setup.py `StepWindowTimer`).
Target: ≤ 1.05× the baseline's time per step.

Host synchronisations per step (benchmarks/host_syncs.py explains the method) are counted
in one extra, untimed run of each side; tunedeck's count must not exceed the baseline's
on plain (non-logging) steps. Writes benchmarks/results/overhead.json + .png.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Comparison, run_alternating, write_result
from benchmarks.host_syncs import HostReadCounter
from benchmarks.lm_setup import (
    StepWindowTimer,
    as_examples,
    bench_config,
    build_bench_model,
    length_stats,
    lm_benchmark_parser,
    parse_lm_arguments,
    tokenize_file,
    train_plain_hf,
    train_tunedeck,
    write_skewed_rows,
)


def count_syncs(side: str, model_dir: Path, rows: Path, examples: list[dict[str, Any]], config: dict[str, Any],
                out: Path, tokens: int) -> dict[str, Any]:
    """One untimed run of `side` under the host-read counter."""
    with HostReadCounter(logging_steps=config["logging_steps"]) as counter:
        if side == "baseline":
            train_plain_hf(model_dir, examples, config, out)
        else:
            train_tunedeck(model_dir, rows, config, out, tokens)
    shutil.rmtree(out, ignore_errors=True)
    return counter.summary()


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    args = parse_lm_arguments(lm_benchmark_parser(__doc__.splitlines()[0], rows=160, repeats=5, threads=True), argv)
    config = bench_config()
    result = BenchmarkResult(
        "overhead",
        __doc__.splitlines()[0],
        parameters={"rows": args.rows, "layers": args.layers, "width": args.width, "device": "cpu",
                    "config": config, "torch_threads": args.threads},
    )
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        model_dir = build_bench_model(root / "model", layers=args.layers, width=args.width)
        rows = root / "rows.jsonl"
        write_skewed_rows(rows, args.rows)
        examples = as_examples(tokenize_file(model_dir, rows, config["max_length"]))
        tokens = int(length_stats(examples)["tokens"])
        result.parameters["lengths"] = length_stats(examples)
        runs = iter(range(1_000_000))
        steps: dict[str, int] = {}
        walls: dict[str, list[float]] = {"baseline": [], "tunedeck": []}  # wall time per step
        medians: dict[str, list[float]] = {"baseline": [], "tunedeck": []}  # median step window (wall)
        losses: dict[str, list[float]] = {}

        def baseline() -> float:
            out = root / f"hf-{next(runs)}"
            with StepWindowTimer() as timer:
                timing = train_plain_hf(model_dir, examples, config, out)
            shutil.rmtree(out, ignore_errors=True)
            steps["baseline"] = timing.steps
            walls["baseline"].append(timing.seconds_per_step)
            medians["baseline"].append(timer.median_step_seconds())
            losses["baseline"] = timing.losses
            return timing.cpu_seconds_per_step

        def candidate() -> float:
            out = root / f"td-{next(runs)}"
            with StepWindowTimer() as timer:
                timing = train_tunedeck(model_dir, rows, config, out, tokens)
            shutil.rmtree(out, ignore_errors=True)
            steps["tunedeck"] = timing.steps
            walls["tunedeck"].append(timing.seconds_per_step)
            medians["tunedeck"].append(timer.median_step_seconds())
            losses["tunedeck"] = timing.losses
            return timing.cpu_seconds_per_step

        comparison = Comparison("cpu_time_per_step", "Overhead: CPU time per step", "s/step",
                                "HF Trainer script", "tunedeck run_training", higher_is_better=False,
                                target_ratio=1.05)
        run_alternating(comparison, baseline, candidate, args.repeats,
                        on_repetition=lambda i, b, c: print(f"  rep {i + 1}: baseline {b * 1000:.1f} ms/step, "
                                                            f"tunedeck {c * 1000:.1f} ms/step, ratio {c / b:.3f}"))
        result.comparisons.append(comparison)
        # The warm-up pair is not a repetition: keep the wall figures of the recorded runs only.
        result.comparisons.append(Comparison(
            "wall_time_per_step", "Overhead: wall time per step", "s/step", "HF Trainer script",
            "tunedeck run_training", higher_is_better=False, baseline_values=walls["baseline"][1:],
            candidate_values=walls["tunedeck"][1:], first=list(comparison.first)))
        result.parameters["steps"] = steps
        result.checks["median_step_window_wall_s"] = medians
        result.checks["logged_losses"] = losses
        syncs = {side: count_syncs(side, model_dir, rows, examples, config, root / f"sync-{side}", tokens)
                 for side in ("baseline", "tunedeck")}
        plain = {side: figures["median_device_reads_per_plain_step"] for side, figures in syncs.items()}
        result.checks["host_syncs"] = {
            **syncs,
            "tunedeck_within_baseline_on_plain_steps": plain["tunedeck"] <= plain["baseline"],
        }
    write_result(result, args.results_dir)
    return result


if __name__ == "__main__":
    main()
