"""torch.compile, measured before it is recommended: tunedeck with `torch_compile: true` against without.

    python benchmarks/torch_compile.py [--rows 160] [--epochs 2] [--repeats 2] [--threads 1]

Same model, data and config as benchmarks/overhead.py (a random-init Llama, fp32 on CPU, full
fine-tuning, batches padded to their longest example), run through `run_training` twice per
repetition: eager, and with `torch_compile: true` (transformers compiles the model with
inductor; padded batches change shape, so it recompiles until it marks the length dynamic).
Two figures, both lower-is-better and without a target, because the answer decides the
README's advice:

1. steady-state step time: the median optimizer-step window (benchmarks/lm_setup.py
   `StepWindowTimer`), which leaves out the steps that compiled;
2. the whole training loop, compilation included: what a short job pays.

Both runs follow the same seed and batches; their logged losses are recorded. Writes
benchmarks/results/torch_compile.json + .png.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Comparison, run_alternating, write_result
from benchmarks.lm_setup import (
    StepWindowTimer,
    as_examples,
    bench_config,
    build_bench_model,
    length_stats,
    lm_benchmark_parser,
    parse_lm_arguments,
    tokenize_file,
    train_tunedeck,
    write_skewed_rows,
)


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    parser = lm_benchmark_parser(__doc__.splitlines()[0], rows=160, repeats=2, threads=True)
    parser.add_argument("--epochs", type=int, default=2)
    args = parse_lm_arguments(parser, argv)
    config = bench_config(epochs=args.epochs)
    result = BenchmarkResult(
        "torch_compile",
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
        loops: dict[str, list[float]] = {"eager": [], "compiled": []}
        losses: dict[str, list[float]] = {}

        def arm(name: str, compiled: bool) -> float:
            out = root / f"{name}-{next(runs)}"
            with StepWindowTimer() as timer:
                timing = train_tunedeck(model_dir, rows, {**config, "torch_compile": compiled}, out, tokens)
            shutil.rmtree(out, ignore_errors=True)
            loops[name].append(timing.seconds)
            losses[name] = timing.losses
            return timer.median_step_seconds()

        steady = Comparison("steady_step_time", "torch.compile: median step time (compiled steps left out)",
                            "s/step", "tunedeck eager", "tunedeck torch_compile", higher_is_better=False)
        # No warm-up pair: inductor's compilation cache would make the first compiled run look free.
        run_alternating(steady, lambda: arm("eager", False), lambda: arm("compiled", True), args.repeats,
                        warmup=False,
                        on_repetition=lambda i, b, c: print(f"  rep {i + 1}: eager {b * 1000:.1f} ms/step, "
                                                            f"compiled {c * 1000:.1f} ms/step, ratio {c / b:.3f}"))
        result.comparisons.append(steady)
        result.comparisons.append(Comparison(
            "training_loop_time", "torch.compile: whole training loop, compilation included", "s",
            "tunedeck eager", "tunedeck torch_compile", higher_is_better=False,
            baseline_values=loops["eager"], candidate_values=loops["compiled"], first=list(steady.first)))
        result.checks["logged_losses"] = losses
        pairs = list(zip(losses["eager"], losses["compiled"], strict=False))
        result.checks["max_logged_loss_difference"] = max(abs(a - b) for a, b in pairs) if pairs else None
    write_result(result, args.results_dir)
    return result


if __name__ == "__main__":
    main()
