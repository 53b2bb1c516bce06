"""Chunked cross-entropy: peak memory and step time of tunedeck's chunked loss against a plain Trainer's stock loss.

    python benchmarks/cross_entropy.py [--rows 64] [--repeats 3] [--vocab 32000] [--layers 4] [--width 256]
                                       [--tail-share 0.04]

Model: a random-init Llama, `--layers` × `--width`, with its embedding and output head widened
to `--vocab` (the tokenizer's few hundred ids are all that occur, but the head's cost is set by
its width), so the logits dominate a step as they do with a real vocabulary. fp32 on CPU, full
fine-tuning, batches of 8 padded to their longest example, loss on completions only
(benchmarks/lm_setup.py's length-skewed prompt/completion rows, `--tail-share` of them with a
long answer), one log per step.

Two arms. Baseline: transformers' Trainer with its stock causal-LM loss (full `(batch, T, vocab)`
logits, upcast to fp32, kept for the backward). Tunedeck: `run_training` with
`chunked_cross_entropy: true` (loss over the labelled positions only, a chunk at a time, each
chunk's gradients computed while its logits exist, so none are kept for the backward and none
recomputed; at most `chunk_logits_limit` logits at once, here from the host's available memory
as no preflight runs). Same seed, so the same batches in the same order; the logged losses of
both arms are compared step by step (tolerance 1e-4).

Memory. Python-level tracers (tracemalloc) do not see torch's allocations, so each arm runs
in a fresh process of its own and reports the kernel's high-water mark of its resident set
(`getrusage` `ru_maxrss`) minus its resident set just before the model is loaded: the memory
that loading and training the model added, model weights and optimizer state included
(identical on both sides), which makes the ratio a conservative view of what the logits
cost. A process per arm also means neither side inherits the other's allocator state, so no
warm-up pair is run. Time: the median optimizer-step window (benchmarks/lm_setup.py
`StepWindowTimer`, first step left out), `--threads` torch threads on both sides.
Writes benchmarks/results/cross_entropy.json + .png.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Comparison, write_result
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

ROOT = Path(__file__).resolve().parents[1]
LOSS_TOLERANCE = 1e-4
ARMS = ("stock", "chunked")


def run_arm(arm: str, model_dir: Path, rows: Path, out: Path, config: dict[str, Any]) -> dict[str, Any]:
    """Train one arm in this process; its peak resident-set growth, median step time and logged losses."""
    import psutil

    examples = as_examples(tokenize_file(model_dir, rows, config["max_length"]))
    tokens = int(length_stats(examples)["tokens"])
    before = psutil.Process().memory_info().rss
    with StepWindowTimer() as timer:
        if arm == "stock":
            timing = train_plain_hf(model_dir, examples, config, out)
        else:
            timing = train_tunedeck(model_dir, rows, {**config, "chunked_cross_entropy": True}, out, tokens)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"arm": arm, "peak_growth_bytes": peak - before, "peak_bytes": peak, "rss_before_bytes": before,
            "step_seconds": timer.median_step_seconds(), "step_cpu_seconds": timer.median_step_seconds(cpu=True),
            "steps": timing.steps, "losses": timing.losses,
            "logits_budget": _recorded_budget(out) if arm != "stock" else None}


def _recorded_budget(out: Path) -> dict[str, Any] | None:
    """The logits budget the run recorded in its events (what a user sees)."""
    for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if "chunked_cross_entropy_logits" in event:
            return dict(event["chunked_cross_entropy_logits"])
    return None


def arm_in_subprocess(arm: str, model_dir: Path, rows: Path, out: Path, threads: int) -> dict[str, Any]:
    """`run_arm` in a fresh interpreter, so its memory high-water mark is its own."""
    command = [sys.executable, "-m", "benchmarks.cross_entropy", "--arm", arm, "--model-dir", str(model_dir),
               "--rows-file", str(rows), "--out", str(out), "--threads", str(threads)]
    # stderr passes through, so a failing arm shows its traceback.
    completed = subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def _parser() -> argparse.ArgumentParser:
    parser = lm_benchmark_parser(__doc__.splitlines()[0], rows=64, repeats=3, threads=True)
    parser.add_argument("--vocab", type=int, default=32000, help="output head width")
    parser.add_argument("--tail-share", type=float, default=0.04,
                        help="share of rows with a long answer (0.5: most steps train over 512 tokens)")
    # One arm in this process (what the parent starts per repetition).
    parser.add_argument("--arm", choices=ARMS, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rows-file", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> BenchmarkResult | None:
    """Run the benchmark and write its result (or, with `--arm`, one arm, printing its figures as JSON)."""
    args = parse_lm_arguments(_parser(), argv)
    config = bench_config(logging_steps=1)
    if args.arm is not None:
        print(json.dumps(run_arm(args.arm, args.model_dir, args.rows_file, args.out, config)))
        return None
    result = BenchmarkResult(
        "cross_entropy",
        __doc__.splitlines()[0],
        parameters={"rows": args.rows, "layers": args.layers, "width": args.width, "vocab_size": args.vocab,
                    "tail_share": args.tail_share,
                    "device": "cpu", "config": config, "torch_threads": args.threads,
                    "chunked_config": {"chunked_cross_entropy": True}},
    )
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        model_dir = build_bench_model(root / "model", layers=args.layers, width=args.width, vocab_size=args.vocab)
        rows = root / "rows.jsonl"
        write_skewed_rows(rows, args.rows, tail_share=args.tail_share)
        examples = as_examples(tokenize_file(model_dir, rows, config["max_length"]))
        result.parameters["lengths"] = length_stats(examples)
        result.parameters["labelled_share"] = (sum(label != -100 for e in examples for label in e["labels"])
                                               / sum(len(e["labels"]) for e in examples))
        runs = iter(range(1_000_000))
        figures: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
        order: list[str] = []
        for index in range(args.repeats):
            # Each arm in its own fresh process; the order rotates so none always goes first.
            rotation = ARMS[index % len(ARMS):] + ARMS[:index % len(ARMS)]
            order.append(rotation[0])
            for name in rotation:
                figures[name].append(arm_in_subprocess(name, model_dir, rows, root / f"{name}-{next(runs)}",
                                                       args.threads))
            step = {name: figures[name][-1]["step_seconds"] for name in ARMS}
            mib = {name: figures[name][-1]["peak_growth_bytes"] / 2**20 for name in ARMS}
            cpu = {name: figures[name][-1]["step_cpu_seconds"] for name in ARMS}
            print(f"  rep {index + 1}: step s stock {step['stock']:.4f}, chunked {step['chunked']:.4f} "
                  f"({step['chunked'] / step['stock']:.2f}; CPU s {cpu['stock']:.4f} vs {cpu['chunked']:.4f}, "
                  f"{cpu['chunked'] / cpu['stock']:.2f}); MiB stock {mib['stock']:,.0f}, chunked {mib['chunked']:,.0f}")

        def compare(key: str, title: str, unit: str, baseline: str, label: str, field: str,
                    scale: float = 1.0) -> Comparison:
            return Comparison(key, title, unit, label, "tunedeck chunked loss", higher_is_better=False,
                              baseline_values=[f[field] / scale for f in figures[baseline]],
                              candidate_values=[f[field] / scale for f in figures["chunked"]], first=list(order))

        result.comparisons += [
            compare("peak_memory", "Chunked cross-entropy: peak host memory added by training", "MiB", "stock",
                    "HF Trainer, stock loss", "peak_growth_bytes", 2**20),
            compare("step_time", "Chunked cross-entropy: median step time", "s/step", "stock",
                    "HF Trainer, stock loss", "step_seconds"),
            # CPU time of the process: on a shared machine, other processes do not inflate it (one torch thread).
            compare("step_cpu_time", "Chunked cross-entropy: median step CPU time", "CPU s/step", "stock",
                    "HF Trainer, stock loss", "step_cpu_seconds"),
        ]
        reference = figures["stock"][-1]["losses"]
        gaps = [abs(a - b) for a, b in zip(reference, figures["chunked"][-1]["losses"], strict=True)]
        result.checks["same_losses"] = {
            "logged_steps": len(reference), "max_abs_difference": max(gaps) if gaps else None,
            "tolerance": LOSS_TOLERANCE, "ok": bool(gaps) and max(gaps) <= LOSS_TOLERANCE,
        }
        result.checks["logits_budget"] = figures["chunked"][-1]["logits_budget"]
        result.checks["arms"] = {name: [{k: v for k, v in f.items() if k != "losses"} for f in runs_]
                                 for name, runs_ in figures.items()}
    write_result(result, args.results_dir)
    return result


if __name__ == "__main__":
    main()
