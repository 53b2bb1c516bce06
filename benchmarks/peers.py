"""Peers: tunedeck against TRL and LLaMA-Factory on the same model, the same ids and the same job, on CPU.

    python benchmarks/peers.py [--rows 600] [--repeats 3] [--modes lora,full] [--arms a,b,...]
                               [--no-llamafactory] [--no-install]
    python benchmarks/peers.py --rows 96 --repeats 1     # a few minutes on two loaded cores

Work (built here, nothing downloaded, cached under benchmarks/.peers/work/): a Llama from its
config, `--layers` × `--width` (4 × 256), with a 32,000-token byte-level BPE trained on
generated text; `--rows` (600) chat rows whose lengths have a long tail (p99/median near 14,
recorded); batch 8, max_length 512, fp32, sdpa, one epoch, loss on assistant tokens only,
LoRA r=16 (alpha 32, all linear layers, no dropout) and full fine-tuning, lr 1e-4, linear
schedule. The rows are tokenized once by tunedeck's data layer; TRL and LLaMA-Factory are
fed those very ids and labels (their fingerprint is recorded), and tunedeck's runs tokenize
the same rows through the same call.

Arms, each one epoch in a fresh process (see benchmarks/peers_arms.py and
benchmarks/peers_llamafactory.py), in turn A B C … A B C … over `--repeats` repetitions:
  tunedeck_unpacked          packing: false (the reference for per-step losses)
  tunedeck_auto              packing: "auto" (the default: each batch of 8 packed into rows)
  tunedeck_packed            packing: true (the whole dataset packed)
  trl_padded                 TRL SFTTrainer, each batch padded
  trl_padding_free           TRL SFTTrainer, padding_free=True
  llamafactory_padded        LLaMA-Factory, each batch padded (its own virtual environment)
  llamafactory_neat_packing  LLaMA-Factory, neat_packing (whole dataset, block-diagonal mask)

Figures per arm (medians): trained tokens/s (the dataset's non-padding tokens over the
training loop's seconds), the same per CPU-second of the arm's process (which other load on
a shared machine does not inflate), wall time of the whole process, peak RSS, and the
largest per-step loss difference from tunedeck_unpacked (arms that see the same batches in
the same order; whole-dataset packing changes the batches, so it has none). Targets, as
ratios: tunedeck_auto ÷ trl_padding_free tokens/s ≥ 2.5; tunedeck_packed ÷
llamafactory_neat_packing tokens/s ≥ 1.5 and peak RSS ≤ 0.7; tunedeck_packed ÷
tunedeck_auto peak RSS ≤ 1.2. Writes benchmarks/results/peers.json (+ .png).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Comparison, write_result

ROOT = Path(__file__).resolve().parents[1]
TUNEDECK_ARMS = ("tunedeck_unpacked", "tunedeck_auto", "tunedeck_packed")
TRL_ARMS = ("trl_padded", "trl_padding_free")
LLAMAFACTORY_ARMS = ("llamafactory_padded", "llamafactory_neat_packing")
ALL_ARMS = (*TUNEDECK_ARMS, *TRL_ARMS, *LLAMAFACTORY_ARMS)
REFERENCE = "tunedeck_unpacked"
# Arms whose steps see the reference's batches in the reference's order: their losses must agree step by step.
SAME_BATCHES = ("tunedeck_auto", "trl_padded", "trl_padding_free", "llamafactory_padded")
LOSS_TOLERANCE = {"full": 1e-4, "lora": 1e-3}  # LoRA's random A matrices come from each tool's own RNG draws
# (key, title, baseline arm, candidate arm, figure, higher is better, target)
TARGETS = (
    ("auto_vs_trl_padding_free", "tunedeck auto ÷ TRL padding_free, tokens/s", "trl_padding_free",
     "tunedeck_auto", "tokens_per_s", True, 2.5),
    ("packed_vs_llamafactory_neat", "tunedeck packing:true ÷ LLaMA-Factory neat_packing, tokens/s",
     "llamafactory_neat_packing", "tunedeck_packed", "tokens_per_s", True, 1.5),
    ("packed_vs_llamafactory_neat_rss", "tunedeck packing:true ÷ LLaMA-Factory neat_packing, peak RSS",
     "llamafactory_neat_packing", "tunedeck_packed", "peak_rss_mib", False, 0.7),
    ("packed_vs_auto_rss", "tunedeck packing:true ÷ packing:auto, peak RSS", "tunedeck_auto", "tunedeck_packed",
     "peak_rss_mib", False, 1.2),
    ("auto_vs_trl_padding_free_cpu", "tunedeck auto ÷ TRL padding_free, tokens per CPU-second",
     "trl_padding_free", "tunedeck_auto", "tokens_per_cpu_s", True, None),
    ("packed_vs_llamafactory_neat_cpu", "tunedeck packing:true ÷ LLaMA-Factory neat_packing, tokens per CPU-second",
     "llamafactory_neat_packing", "tunedeck_packed", "tokens_per_cpu_s", True, None),
)
UNITS = {"tokens_per_s": "tokens/s", "tokens_per_cpu_s": "tokens/CPU-s", "peak_rss_mib": "MiB"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600, help="chat rows (steps per epoch = rows / 8 unpacked)")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions of every arm, alternated")
    parser.add_argument("--modes", default="lora,full", help="comma-separated: lora, full")
    parser.add_argument("--arms", default=",".join(ALL_ARMS), help="comma-separated subset of the arms")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=32_000)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--no-llamafactory", action="store_true", help="skip LLaMA-Factory's arms")
    parser.add_argument("--no-install", action="store_true",
                        help="do not create LLaMA-Factory's environment when missing (its arms are skipped)")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "benchmarks" / ".peers" / "work")
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if not args.modes or set(args.modes) - {"lora", "full"}:
        parser.error(f"--modes takes lora and/or full, not {','.join(args.modes) or 'nothing'}")
    args.arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    unknown = [arm for arm in args.arms if arm not in ALL_ARMS]
    if unknown or not args.arms:
        parser.error(f"unknown arm(s) {unknown}; expected some of {', '.join(ALL_ARMS)}")
    if args.rows < 8 or args.repeats < 1:
        parser.error("--rows must be at least 8 and --repeats at least 1")
    return args


def select_arms(wanted: list[str], llamafactory_problem: str | None) -> tuple[list[str], dict[str, str]]:
    """The arms to run, in the benchmark's order, and why any wanted one is skipped."""
    skipped: dict[str, str] = {}
    chosen = []
    for arm in ALL_ARMS:
        if arm not in wanted:
            continue
        if arm in LLAMAFACTORY_ARMS and llamafactory_problem is not None:
            skipped[arm] = llamafactory_problem
            continue
        chosen.append(arm)
    return chosen, skipped


def llamafactory_problem(args: argparse.Namespace) -> str | None:
    """None when LLaMA-Factory's arms can run (creating its environment unless told not to), else why not."""
    from benchmarks.peers_venv import ensure_llamafactory, llamafactory_status

    if args.no_llamafactory:
        return "--no-llamafactory"
    if not any(arm in LLAMAFACTORY_ARMS for arm in args.arms):
        return None
    if args.no_install:
        return llamafactory_status()
    print("LLaMA-Factory's environment (created when missing; minutes the first time):", flush=True)
    return ensure_llamafactory()


def prepare_work(args: argparse.Namespace) -> tuple[Path, dict[str, Any]]:
    """The model, rows, shared ids and settings for these sizes (built once, then reused)."""
    from benchmarks.peers_workload import build_model, shared_ids, write_chat_rows

    work = args.work_dir / f"rows{args.rows}-l{args.layers}-w{args.width}-v{args.vocab}-m{args.max_length}"
    settings_path = work / "settings.json"
    if settings_path.exists():
        return work, json.loads(settings_path.read_text(encoding="utf-8"))
    staging = work.with_name(work.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    print(f"building the work in {work} (tokenizer training takes a minute)", flush=True)
    model = build_model(staging / "model", layers=args.layers, width=args.width, vocab_size=args.vocab)
    write_chat_rows(staging / "rows.jsonl", args.rows)
    stats = shared_ids(staging / "model", staging / "rows.jsonl", args.max_length, staging / "ids.json")
    settings = {"batch_size": 8, "learning_rate": 1e-4, "max_length": args.max_length, "seed": 0, "lora_r": 16,
                "lora_alpha": 32, "tokens": stats["tokens"], "lengths": stats, "model": model}
    (staging / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    staging.rename(work)
    return work, settings


def arm_command(arm: str, mode: str, work: Path, out: Path, run_dir: Path) -> list[str]:
    """The command that runs one arm in its own process (LLaMA-Factory's with its environment's Python)."""
    tail = ["--arm", arm, "--mode", mode, "--work", str(work), "--out", str(out), "--run-dir", str(run_dir)]
    if arm in LLAMAFACTORY_ARMS:
        from benchmarks.peers_venv import venv_python

        return [str(venv_python()), str(ROOT / "benchmarks" / "peers_llamafactory.py"), *tail]
    return [sys.executable, "-m", "benchmarks.peers_arms", *tail]


def run_one(arm: str, mode: str, work: Path, scratch: Path, index: int) -> dict[str, Any]:
    """Run one arm once; its figures, or `{"error": ...}` with the end of its log."""
    out, run_dir, log = scratch / f"{index}.json", scratch / f"run-{index}", scratch / f"{index}.log"
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as handle:
        code = subprocess.call(arm_command(arm, mode, work, out, run_dir), cwd=ROOT, stdout=handle,
                               stderr=subprocess.STDOUT)
    wall = time.perf_counter() - started
    shutil.rmtree(run_dir, ignore_errors=True)
    if code != 0 or not out.exists():
        return {"error": f"exit {code}: " + log.read_text(encoding="utf-8", errors="replace")[-1500:]}
    figures: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    figures["wall_s"] = wall
    figures["tokens_per_s"] = figures["tokens"] / figures["seconds"]
    figures["tokens_per_cpu_s"] = figures["tokens"] / max(figures["cpu_seconds"], 1e-9)
    return figures


def loss_gap(reference: list[float], other: list[float]) -> float | None:
    """Largest per-step difference of two loss curves of equal length (None when they do not line up)."""
    if not reference or len(reference) != len(other):
        return None
    return max(abs(a - b) for a, b in zip(reference, other, strict=True))


def median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    """Median of one figure over an arm's successful repetitions."""
    values = [run[key] for run in runs if key in run and run[key] is not None]
    return statistics.median(values) if values else None


def format_arms(mode: str, summary: dict[str, dict[str, Any]]) -> str:
    """The arms of one mode side by side, tokens/s also as a ratio to tunedeck_unpacked."""
    reference = (summary.get(REFERENCE) or {}).get("tokens_per_s")
    lines = [f"-- {mode}: median of repetitions --",
             f"{'arm':27s} {'tokens/s':>9s} {'÷unpacked':>9s} {'tok/CPU-s':>9s} {'wall s':>7s} {'RSS MiB':>8s} "
             f"{'steps':>5s} {'loss |Δ|':>9s}"]
    for arm, figures in summary.items():
        if "error" in figures:
            lines.append(f"{arm:27s} failed: {figures['error'].splitlines()[-1][:80] if figures['error'] else ''}")
            continue
        rate = figures["tokens_per_s"]
        gap = figures.get("loss_max_abs_diff")
        lines.append(
            f"{arm:27s} {rate:9,.0f} {(rate / reference if reference else float('nan')):9.2f} "
            f"{figures['tokens_per_cpu_s']:9,.0f} {figures['wall_s']:7.1f} {figures['peak_rss_mib']:8.0f} "
            f"{figures['steps']:5d} {('—' if gap is None else f'{gap:.2g}'):>9s}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run every arm, alternated, and write the result."""
    args = parse_args(argv)
    problem = llamafactory_problem(args)
    arms, skipped = select_arms(args.arms, problem)
    for arm, why in skipped.items():
        print(f"skipping {arm}: {why}", flush=True)
    work, settings = prepare_work(args)
    result = BenchmarkResult("peers", __doc__.splitlines()[0],
                             packages=("torch", "transformers", "peft", "trl", "accelerate", "datasets", "tokenizers"))
    result.parameters = {"rows": args.rows, "repeats": args.repeats, "modes": args.modes, "arms": arms,
                         "skipped_arms": skipped, "device": "cpu", "dtype": "float32", "attention": "sdpa",
                         "batch_size": settings["batch_size"], "max_length": settings["max_length"],
                         "learning_rate": settings["learning_rate"], "lora": {"r": settings["lora_r"],
                         "alpha": settings["lora_alpha"], "dropout": 0.0, "targets": "all linear"},
                         "model": settings["model"], "lengths": settings["lengths"]}
    result.checks["length_skew"] = {"p99_over_median": settings["lengths"]["p99_over_median"]}
    result.checks["shared_ids_sha256"] = settings["lengths"]["sha256"]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {(m, a): [] for m in args.modes for a in arms}
    orders: dict[str, list[list[str]]] = {mode: [] for mode in args.modes}
    counter = 0
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        for repetition in range(args.repeats):
            for mode in args.modes:
                orders[mode].append(list(arms))
                for arm in arms:  # A B C … each repetition, so a drift of the machine loads every arm alike
                    counter += 1
                    figures = run_one(arm, mode, work, scratch, counter)
                    runs[(mode, arm)].append(figures)
                    state = figures["error"].splitlines()[0][:60] if "error" in figures else (
                        f"{figures['tokens_per_s']:,.0f} tok/s, {figures['wall_s']:.0f} s wall, "
                        f"{figures['peak_rss_mib']:,.0f} MiB")
                    print(f"  rep {repetition + 1} {mode:4s} {arm:27s} {state}", flush=True)
    summaries: dict[str, dict[str, dict[str, Any]]] = {}
    for mode in args.modes:
        summary: dict[str, dict[str, Any]] = {}
        reference_losses = next((r["losses"] for r in runs.get((mode, REFERENCE), []) if "losses" in r), [])
        for arm in arms:
            good = [r for r in runs[(mode, arm)] if "error" not in r]
            if not good:
                summary[arm] = {"error": runs[(mode, arm)][-1]["error"] if runs[(mode, arm)] else "did not run"}
                continue
            figures = {key: median_of(good, key) for key in ("tokens_per_s", "tokens_per_cpu_s", "seconds",
                                                              "wall_s", "peak_rss_mib")}
            figures["steps"] = int(good[0]["steps"])
            figures["repetitions"] = len(good)
            figures["versions"] = good[0].get("versions", {})
            figures["per_repetition"] = [{key: r[key] for key in ("tokens_per_s", "tokens_per_cpu_s", "wall_s",
                                                                  "peak_rss_mib")} for r in good]
            figures["loss_max_abs_diff"] = (loss_gap(reference_losses, good[0]["losses"])
                                            if arm in (REFERENCE, *SAME_BATCHES) else None)
            summary[arm] = figures
        summaries[mode] = summary
        for key, title, baseline, candidate, figure, higher, target in TARGETS:
            base_runs, cand_runs = runs.get((mode, baseline), []), runs.get((mode, candidate), [])
            pairs = [(b[figure], c[figure]) for b, c in zip(base_runs, cand_runs, strict=False)
                     if "error" not in b and "error" not in c]
            if not pairs:
                continue
            order = orders[mode][0]
            first = baseline if order.index(baseline) < order.index(candidate) else candidate
            result.comparisons.append(Comparison(
                f"{mode}_{key}", f"{mode}: {title}", UNITS[figure], baseline, candidate, higher, target,
                baseline_values=[b for b, _ in pairs], candidate_values=[c for _, c in pairs],
                first=["baseline" if first == baseline else "candidate"] * len(pairs)))
        gaps = {arm: f.get("loss_max_abs_diff") for arm, f in summary.items() if arm in SAME_BATCHES}
        result.checks[f"{mode}_loss_agreement"] = {
            "reference": REFERENCE, "max_abs_difference": gaps, "tolerance": LOSS_TOLERANCE[mode],
            "ok": all(g is not None and g <= LOSS_TOLERANCE[mode] for g in gaps.values()) if gaps else None}
    result.checks["arms"] = summaries
    result.notes.append("Each arm is one epoch in a fresh process; peak RSS is that process's whole life "
                        "(imports, model load, training). Tokens/s counts the dataset's non-padding tokens "
                        "over the trainer's loop; tokens per CPU-second divides by the process's CPU time over "
                        "the same loop, which the load of other processes does not inflate.")
    write_result(result, args.results_dir)
    for mode in args.modes:
        print(format_arms(mode, summaries[mode]))
    return result


if __name__ == "__main__":
    main()
