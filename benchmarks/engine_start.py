"""Engine start: a tiny CPU job's whole run, forked from the fork server against a fresh engine process.

    python -m benchmarks.engine_start [--repeats 5] [--rows 8]

The baseline is what a worker did before the fork server, and still does on GPU
machines: `python -m tunedeck.engine.child --spec FILE` in a new process, which imports
torch, transformers and peft before it reads the spec. The candidate asks a running
`tunedeck.engine.fork_server` (started once, before the repetitions, as a worker starts
it with itself) to fork the same run. Each figure is the wall time from launch to exit,
so it includes the training itself (a few steps of a 2-layer Llama), the same on both
sides. Both runs must succeed with the same losses.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import BenchmarkResult, Comparison, run_alternating, write_result


def _spec(root: Path, model: Path, rows: int, name: str) -> Path:
    from tunedeck.config.loading import validate_config
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.training.run_spec import RunSpec

    data = root / f"{name}.jsonl"
    data.write_text("".join(
        json.dumps({"messages": [{"role": "user", "content": f"What is {i} plus {i}?"},
                                 {"role": "assistant", "content": f"It is {2 * i}."}]}) + "\n"
        for i in range(rows)
    ), encoding="utf-8")
    config = validate_config({"epochs": 1, "batch_size": 2, "mixed_precision": "fp32", "preflight": False,
                              "save_strategy": "no", "eval_strategy": "no", "logging_steps": 1, "seed": 0})
    spec = RunSpec(config, ModelRef(str(model)), data, root / name)
    path = root / f"{name}-spec.json"
    path.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
    return path


def _losses(run_dir: Path) -> list[float]:
    events = (json.loads(line) for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines())
    return [float(event["loss"]) for event in events if event.get("type") == "metric" and "loss" in event]


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", type=int, default=8)
    args = parser.parse_args(argv)
    from tunedeck.demo.tiny_models import create_tiny_model
    from tunedeck.worker.fork_server_client import ForkServerClient

    result = BenchmarkResult("engine_start", __doc__.splitlines()[0],
                             parameters={"rows": args.rows, "model": "tiny llama (tunedeck.demo.tiny_models)"})
    losses: dict[str, list[list[float]]] = {"fresh": [], "forked": []}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        model = create_tiny_model("llama", root / "model").path
        server = ForkServerClient.start({}, root / "fork-server.log")
        runs = iter(range(1_000_000))
        try:
            def fresh() -> float:
                name = f"fresh-{next(runs)}"
                spec = _spec(root, model, args.rows, name)
                started = time.perf_counter()
                code = subprocess.call([sys.executable, "-m", "tunedeck.engine.child", "--spec", str(spec)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                seconds = time.perf_counter() - started
                if code != 0:
                    raise RuntimeError(f"the fresh engine exited with {code}")
                losses["fresh"].append(_losses(root / name))
                return seconds

            def forked() -> float:
                name = f"forked-{next(runs)}"
                spec = _spec(root, model, args.rows, name)
                started = time.perf_counter()
                run = server.launch(spec, root / f"{name}.log")
                if run is None:
                    raise RuntimeError("the fork server did not serve")
                code = run.wait(timeout=600)
                seconds = time.perf_counter() - started
                if code != 0:
                    raise RuntimeError(f"the forked run exited with {code}: {run.last_lines()}")
                losses["forked"].append(_losses(root / name))
                return seconds

            comparison = Comparison("run_wall_s", "Engine start: tiny CPU job, launch to exit", "s",
                                    "fresh engine process", "forked from the fork server", higher_is_better=False)
            # The warm-up runs once on each side: the fork server's own imports are not charged to a repetition.
            run_alternating(comparison, fresh, forked, args.repeats,
                            on_repetition=lambda i, b, c: print(f"  rep {i + 1}: fresh {b:.2f} s, forked {c:.2f} s, "
                                                                f"ratio {c / b:.3f}"))
        finally:
            server.close()
    result.comparisons.append(comparison)
    reference = losses["fresh"][0]
    worst = max(abs(a - b) for run in losses["fresh"] + losses["forked"] for a, b in zip(run, reference, strict=True))
    result.checks["same_losses_max_abs_diff"] = worst
    if worst > 1e-6:
        raise RuntimeError(f"forked and fresh runs logged different losses (max difference {worst})")
    print(f"median ratio {comparison.median_ratio():.3f}; losses equal within {worst:.1e}")
    write_result(result)
    return result


if __name__ == "__main__":
    main()
