"""Training on several GPUs: non-padding tokens/s per device under DDP and FSDP, against one device.

    python benchmarks/gpu/distributed_throughput.py [--devices 2] [--modes lora,full] [--offload]
    python benchmarks/gpu/distributed_throughput.py --dry-run  # tiny llama on the CPU, DDP over gloo

One prepared script for a machine with CUDA GPUs, unattended, under 8 minutes: `--time-budget-s`
holds across and within arms, as in benchmarks/gpu/train_throughput.py. An arm that would start
after it is skipped and listed; a running arm is cancelled through the run's stop file when it
runs out, and its figures cover the steps measured so far (`steps_measured`; an arm stopped before
any measured step is listed as skipped).

Every arm runs the real engine as the worker runs it: a run spec, then `python -m
tunedeck.engine.child` started by `EngineChild.start` (`tunedeck.worker.child_process`: one process,
or `torchrun` with one rank per device and rank 0's outcome file), with `CUDA_VISIBLE_DEVICES`
showing it the first N GPUs (`device_env`, as the worker shows a job its reserved devices).

Arms, per mode (LoRA r=16 on all linear layers, and full fine-tuning), bf16 mixed precision:
  single        devices 1 (strategy none)
  ddp           devices N, strategy ddp
  fsdp          devices N, strategy fsdp (fsdp_cpu_offload false)
  fsdp_offload  devices N, strategy fsdp with fsdp_cpu_offload true (`--offload`)
N is `--devices` (default: every visible GPU). With one GPU only `single` runs and the others are
listed as skipped with the reason. Every arm has the same per-device micro-batch (`--batch-size`
examples, `--gradient-accumulation-steps`), so per-device tokens/s compares directly and the ideal
scaling efficiency, (arm tokens/s ÷ N) ÷ single-device tokens/s, is 1.0. Every arm uses the same
loss path (`chunked_cross_entropy` from `--chunked-loss`, false by default: "auto" would give it to
the one-process arm only) and the engine's defaults otherwise: micro-batch packing (`packing:
"auto"`), attention `auto` (flash-attention 2 when installed, else sdpa), AdamW, no checks before
training (`preflight: false`), no out-of-memory retry with a smaller micro-batch, no checkpoints or
evaluation, a metric event every `--logging-steps`.

Model: a ~0.5B decoder built from a config (Qwen2-0.5B shapes, as train_throughput.py; random
init, saved once to a temporary folder with a small local BPE tokenizer; nothing downloaded).
Data: synthetic text rows of exactly `--example-tokens` tokens each (BOS and EOS included), in the
`text` format, so a step holds a known number of non-padding tokens on every rank whatever order
the sampler draws: batch × accumulation × processes × example tokens. The engine's own count
(`tokens_seen` of its metric events) is recorded beside it as a check (`engine_tokens_ratio`): on
several processes it is the trainer's sum of the attention mask, which for packed rows under sdpa
is the (batch, 1, T, T) block mask, so it counts query/key pairs, not tokens (the CPU dry run shows
(example tokens + 1) / 2 there; flash-attention's flattened rows carry no mask and count right).

Figures per arm, over the steps after `--warmup` (the metric events' times, written by rank 0
after each logged step, whose loss read waits for the device): tokens/s in total and per device,
scaling efficiency, seconds per step, rank 0's peak accelerator memory (results.json
`diagnostics.training_speed.accelerator_peak_bytes`), steps measured, start-up seconds (launch to
the first metric event) and wall seconds (launch to exit); plus the strategy and per-rank devices
the run's `distribution` log event reports, the attention kernel and the packing it used. Writes
benchmarks/results/gpu_distributed_throughput.json (+ .png); a dry run writes
gpu_distributed_throughput_dry_run.json into `--results-dir`, else into a new temporary folder
(it prints the path), so it never lands beside the published results. The dry run checks the chain
only: its CPU rates swing several-fold with the machine's load and threads per process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.harness import BenchmarkResult, Comparison, write_result

CANCEL_GRACE_S = 45.0  # after a cancel request, how long a run may take to stop before it is killed
MARGIN_STEPS = 25  # rows beyond the measured steps, so the cancel after the last one lands before the data ends


@dataclass(frozen=True)
class Arm:
    """One way of placing the same training on the machine."""

    name: str
    processes: int
    strategy: str  # the config's strategy: none, ddp or fsdp
    offload: bool = False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="tiny llama on the CPU: single and ddp (2 processes, gloo) arms, a few steps")
    parser.add_argument("--devices", type=int, default=None, help="GPUs of the multi-device arms (default: all)")
    parser.add_argument("--modes", default="lora,full", help="comma-separated: lora, full")
    parser.add_argument("--offload", action="store_true", help="add the fsdp_offload arm")
    parser.add_argument("--steps", type=int, default=50, help="measured optimizer steps per arm")
    parser.add_argument("--warmup", type=int, default=10, help="steps before the measured window")
    parser.add_argument("--logging-steps", type=int, default=5,
                        help="steps between metric events (warmup and steps are rounded up to multiples)")
    parser.add_argument("--batch-size", type=int, default=8, help="examples per micro-batch on each device")
    parser.add_argument("--gradient-accumulation-steps", type=int, default=1)
    parser.add_argument("--example-tokens", type=int, default=512, help="tokens of every example")
    parser.add_argument("--max-length", type=int, default=2048, help="the config's max_length (packed row size)")
    parser.add_argument("--chunked-loss", choices=("false", "true", "auto"), default="false",
                        help="the config's chunked_cross_entropy, in every arm")
    parser.add_argument("--gradient-checkpointing", action="store_true", help="the config's gradient_checkpointing")
    parser.add_argument("--time-budget-s", type=float, default=450.0,
                        help="start no arm after this, and cancel a running one at it")
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="default: benchmarks/results (a dry run: a new temporary folder)")
    args = parser.parse_args(argv)
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = sorted(set(args.modes) - {"lora", "full"})
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; expected lora and/or full")
    if args.devices is not None and args.devices < 1:
        parser.error("--devices must be at least 1")
    if args.dry_run:
        args.steps, args.warmup, args.logging_steps = min(args.steps, 3), min(args.warmup, 1), 1
        args.batch_size, args.example_tokens, args.max_length = 2, 32, 64
    if args.example_tokens > args.max_length:
        parser.error("--example-tokens must not exceed --max-length (rows would be truncated)")
    every = args.logging_steps
    args.warmup = -(-args.warmup // every) * every
    args.steps = max(every, -(-args.steps // every) * every)
    return args


def gpu_ids(count: int) -> tuple[str, ...]:
    """The ids of the first `count` GPUs this process may use (honouring its own CUDA_VISIBLE_DEVICES)."""
    visible = [item.strip() for item in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if item.strip()]
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return tuple(visible[:count])
    return tuple(str(index) for index in range(count))


def plan_arms(visible_gpus: int, wanted: int | None, offload: bool, dry_run: bool) -> tuple[list[Arm], dict[str, str]]:
    """The arms this machine can run, and why the others are skipped."""
    skipped: dict[str, str] = {}
    if dry_run:
        arms = [Arm("single", 1, "none"), Arm("ddp", 2, "ddp")]
        skipped["fsdp"] = "FSDP shards across GPUs: the engine refuses strategy fsdp on the CPU"
        if offload:
            skipped["fsdp_offload"] = skipped["fsdp"]
        return arms, skipped
    count = visible_gpus if wanted is None else wanted
    arms = [Arm("single", 1, "none")]
    multi = [Arm("ddp", count, "ddp"), Arm("fsdp", count, "fsdp")]
    if offload:
        multi.append(Arm("fsdp_offload", count, "fsdp", offload=True))
    if count > visible_gpus:
        reason = f"--devices {count} but {visible_gpus} GPU(s) visible"
    elif count < 2:
        reason = f"needs at least 2 GPUs; {visible_gpus} visible" if wanted is None else "--devices 1"
    else:
        return arms + multi, skipped
    for arm in multi:
        skipped[arm.name] = reason
    return arms, skipped


def arm_config(arm: Arm, lora: bool, args: argparse.Namespace) -> dict[str, Any]:
    """The job config of one arm (what a user would submit)."""
    config: dict[str, Any] = {  # one epoch: the data file sets the number of steps
        "epochs": 1,
        "batch_size": args.batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "max_length": args.max_length,
        "learning_rate": 1e-4 if lora else 1e-5,
        "warmup_ratio": 0.0,
        "lr_scheduler": "constant",
        "use_peft": lora,
        "mixed_precision": "fp32" if args.dry_run else "bf16",
        "gradient_checkpointing": args.gradient_checkpointing,
        "save_strategy": "no",
        "eval_strategy": "no",
        "logging_steps": args.logging_steps,
        "preflight": False,
        "auto_reduce_batch_on_oom": False,  # a smaller micro-batch would not be the arm asked for
        "chunked_cross_entropy": {"false": False, "true": True}.get(args.chunked_loss, "auto"),
        "devices": 0 if args.dry_run else arm.processes,
        "processes": arm.processes,
        "strategy": arm.strategy,
    }
    if arm.strategy == "fsdp":
        config["fsdp_cpu_offload"] = arm.offload
    return config


def build_model(folder: Path, dry_run: bool) -> tuple[Path, Any]:
    """Save the model and its tokenizer under `folder`; returns the model folder and the tokenizer.

    The dry run's is the tiny llama of tunedeck/demo/tiny_models.py; otherwise a Qwen2-0.5B-shaped
    model with random weights (bf16 on disk: the engine loads it in the dtype it trains in) and
    the same small BPE tokenizer (its ids fit the larger vocabulary).
    """
    from tunedeck.demo.tiny_models import create_tiny_model

    if dry_run:
        path = create_tiny_model("llama", folder / "model", pretrain_steps=0).path
        from transformers import AutoTokenizer

        return path, AutoTokenizer.from_pretrained(path)
    import torch
    from transformers import AutoModelForCausalLM

    from benchmarks.gpu.train_throughput import model_config
    from tunedeck.demo.tiny_corpus import builtin_corpus
    from tunedeck.demo.tiny_models import build_tokenizer

    tokenizer = build_tokenizer(builtin_corpus(), "llama")
    config = model_config(dry_run=False)
    config.pad_token_id, config.bos_token_id = tokenizer.pad_token_id, tokenizer.bos_token_id
    config.eos_token_id = tokenizer.eos_token_id
    tokenizer.model_max_length = config.max_position_embeddings
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    path = folder / "model"
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    del model
    return path, tokenizer


def one_token_words(tokenizer: Any) -> list[str]:
    """Words (with their leading space) the tokenizer encodes as exactly one token."""
    from tunedeck.data.tokenize import encode_texts

    candidates = sorted({token[1:] for token in tokenizer.get_vocab() if token.startswith("Ġ") and token[1:].isalpha()})
    texts = [f" {word}" for word in candidates]
    return [text for text, ids in zip(texts, encode_texts(tokenizer, texts), strict=True) if len(ids) == 1]


def write_rows(path: Path, tokenizer: Any, count: int, tokens: int) -> Path:
    """`count` text rows that the engine tokenizes to exactly `tokens` tokens each (checked)."""
    from tunedeck.data.tokenize import encode_rows, special_affixes

    head, _ = special_affixes(tokenizer)
    body = tokens - len(head) - (1 if tokenizer.eos_token_id is not None else 0)  # the engine appends EOS
    words = one_token_words(tokenizer)
    if body < 1 or not words:
        raise SystemExit(f"cannot build rows of {tokens} tokens with this tokenizer")
    rng = random.Random(0)
    rows = [{"text": "".join(rng.choice(words) for _ in range(body))} for _ in range(count)]
    encoded = encode_rows(rows, "text", tokenizer, max_length=tokens + 1)
    lengths = {len(ids) for ids in encoded.input_ids}
    if lengths != {tokens}:
        raise SystemExit(f"synthetic rows tokenize to {sorted(lengths)} tokens, not {tokens}")
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


class BudgetSpent(RuntimeError):
    """The time budget ran out before an arm measured any step."""


def read_events(path: Path) -> list[dict[str, Any]]:
    """The run's events so far (a line still being written is left out)."""
    events = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def run_arm(arm: Arm, lora: bool, model: Path, tokenizer: Any, args: argparse.Namespace, folder: Path,
            deadline: float = float("inf")) -> dict[str, Any]:
    """Train one arm in its own engine process(es); its figures over the steps after the warm-up.

    Raises BudgetSpent when the budget ends before a measured step, RuntimeError when the run fails.
    """
    from tunedeck.config.distribution import placement
    from tunedeck.config.loading import validate_config
    from tunedeck.core.rundir import RunDir
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.training.run_spec import RunSpec
    from tunedeck.worker.child_process import EngineChild, device_env

    folder.mkdir(parents=True, exist_ok=True)
    config = validate_config(arm_config(arm, lora, args))
    where = placement(config)
    last_step = args.warmup + args.steps
    rows_per_step = args.batch_size * args.gradient_accumulation_steps * where.processes
    train = write_rows(folder / "train.jsonl", tokenizer, (last_step + MARGIN_STEPS) * rows_per_step,
                       args.example_tokens)
    run_dir = RunDir(folder / "run")
    spec_path, outcome_path = folder / "spec.json", folder / "outcome.json"
    spec = RunSpec(config, ModelRef(str(model)), train, run_dir.root).to_dict()
    del spec["processes"]  # as the worker writes it: the child takes the number from its launcher
    spec_path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    env = {**device_env(gpu_ids(where.devices), hide=where.hide_devices), "HF_HUB_OFFLINE": "1"}
    started, launched = time.monotonic(), time.time()
    child = EngineChild.start(spec_path, folder / "engine.log", env=env, processes=where.processes,
                              outcome_path=outcome_path)
    cancelled_at: float | None = None
    stopped_by_budget = False
    try:
        while child.poll() is None:
            time.sleep(0.2)
            if cancelled_at is None:
                steps = [event["step"] for event in read_events(run_dir.events) if event.get("type") == "metric"]
                out_of_time = time.monotonic() >= deadline
                if out_of_time and not (steps and steps[-1] > args.warmup):
                    child.kill()  # nothing measured yet: waiting for the next step would only spend time
                    stopped_by_budget = True
                    break
                if out_of_time or (steps and steps[-1] >= last_step):
                    # Cancel: every rank stops at the same step, with no final model to save.
                    run_dir.stop_request.write_text("cancel", encoding="utf-8")
                    cancelled_at, stopped_by_budget = time.monotonic(), out_of_time
            elif time.monotonic() - cancelled_at > CANCEL_GRACE_S:
                child.kill()
                break
        code = child.wait(timeout=60)
    finally:
        child.kill()
    wall = time.monotonic() - started
    if where.processes > 1:
        try:
            code = int(json.loads(outcome_path.read_text(encoding="utf-8"))["exit"])
        except (OSError, ValueError, KeyError, TypeError):
            code = code or 1
    events = read_events(run_dir.events)
    metrics = [event for event in events if event.get("type") == "metric"]
    start = next((event for event in metrics if event["step"] == args.warmup), None)
    window = [event for event in metrics if args.warmup < event["step"] <= last_step]
    complete = bool(window) and window[-1]["step"] >= last_step
    if code not in (0, 4) and not stopped_by_budget and not complete:  # 4: cancelled, as asked
        tail = " | ".join(child.last_lines(6))
        raise RuntimeError(f"engine exit {code}: {tail}"[:600])
    if start is None or not window:
        raise BudgetSpent(f"time budget spent after {metrics[-1]['step'] if metrics else 0} step(s)")
    end = window[-1]
    steps_measured = int(end["step"]) - args.warmup
    seconds = float(end["time"]) - float(start["time"])
    tokens = steps_measured * rows_per_step * args.example_tokens
    engine_tokens = int(end["tokens_seen"]) - int(start["tokens_seen"])
    results = _read_json(run_dir.results)
    speed = (results.get("diagnostics") or {}).get("training_speed") or {}
    peak = speed.get("accelerator_peak_bytes")
    logs = [event for event in events if event.get("type") == "log"]
    distribution: dict[str, Any] = next((event["distribution"] for event in logs if "distribution" in event), {})
    loaded: dict[str, Any] = next((event for event in logs if "attn_implementation" in event), {})
    packing = next((event.get("packing") for event in logs if "packing" in event), None)
    return {
        "tokens_per_s": tokens / seconds,
        "tokens_per_s_per_device": tokens / seconds / where.processes,
        "seconds_per_step": seconds / steps_measured,
        "steps_measured": steps_measured,
        "stopped_by_budget": stopped_by_budget and steps_measured < args.steps,
        "tokens": tokens,
        "engine_tokens_ratio": engine_tokens / tokens,
        "peak_memory_gib_rank0": peak / 2**30 if isinstance(peak, int | float) else None,
        # The engine's own split (results.json), over every step it ran, warm-up included: a cross-check.
        "engine_seconds_per_step": speed.get("seconds_per_step"),
        "engine_data_share": speed.get("data_share"),
        "processes": where.processes,
        "devices": list(gpu_ids(where.devices)) if not where.hide_devices else [],
        "strategy": distribution.get("strategy"),
        "cpu_offload": distribution.get("cpu_offload"),
        "ranks": [{"rank": rank.get("rank"), "device": rank.get("device"), "device_id": rank.get("device_id")}
                  for rank in distribution.get("ranks", [])],
        "attn_implementation": loaded.get("attn_implementation"),
        "precision": loaded.get("precision"),
        "packing": packing,
        "trainable_parameters": loaded.get("trainable_parameters"),
        "status": results.get("status"),
        "exit_code": code,
        "startup_s": float(metrics[0]["time"]) - launched,
        "wall_s": wall,
    }


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run every arm that fits the time budget and write the result."""
    import torch

    args = parse_args(argv)
    started = time.monotonic()
    visible = torch.cuda.device_count() if torch.cuda.is_available() and not args.dry_run else 0
    if not visible and not args.dry_run:
        raise SystemExit("no CUDA GPU: run with --dry-run to check the script on CPU")
    device_name = torch.cuda.get_device_name(0) if visible else "cpu (dry run)"
    arms, skipped = plan_arms(visible, args.devices, args.offload, args.dry_run)
    multi = max(arm.processes for arm in arms)
    name = "gpu_distributed_throughput_dry_run" if args.dry_run else "gpu_distributed_throughput"
    result = BenchmarkResult(name, __doc__.splitlines()[0], packages=(
        "torch", "transformers", "peft", "accelerate", "flash_attn"))
    result.parameters = {
        "device": device_name, "visible_gpus": visible, "devices": multi, "steps": args.steps,
        "warmup": args.warmup, "logging_steps": args.logging_steps, "batch_size": args.batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps, "example_tokens": args.example_tokens,
        "max_length": args.max_length, "chunked_cross_entropy": args.chunked_loss,
        "gradient_checkpointing": args.gradient_checkpointing, "modes": args.modes,
        "time_budget_s": args.time_budget_s, "skipped_arms": skipped,
    }
    deadline = started + args.time_budget_s
    arm_figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="tunedeck-distributed-") as scratch:
        folder = Path(scratch)
        built: tuple[Path, Any] | None = None  # made before the first arm that runs
        for mode in args.modes:
            for arm in arms:
                key = f"{mode}/{arm.name}"
                if time.monotonic() >= deadline:
                    skipped[key] = "time budget spent"
                    continue
                built = built or build_model(folder, args.dry_run)
                model, tokenizer = built
                try:
                    figures = run_arm(arm, mode == "lora", model, tokenizer, args, folder / mode / arm.name, deadline)
                except BudgetSpent as error:
                    skipped[key] = str(error)
                    continue
                except Exception as error:  # one arm failing (out of memory, a hung rank) must not lose the rest
                    skipped[key] = f"failed: {type(error).__name__}: {error}"[:600]
                    continue
                base = arm_figures.get(f"{mode}/single")
                if base:
                    figures["scaling_efficiency"] = figures["tokens_per_s_per_device"] / base["tokens_per_s"]
                arm_figures[key] = figures
                print(f"{key:20s} {figures['processes']} proc  {figures['tokens_per_s']:12,.0f} tok/s  "
                      f"{figures['tokens_per_s_per_device']:12,.0f} tok/s/device"
                      + (f"  efficiency {figures['scaling_efficiency']:.2f}" if "scaling_efficiency" in figures
                         else ""), flush=True)
    result.checks["arms"] = arm_figures
    for mode in args.modes:
        base = arm_figures.get(f"{mode}/single")
        for arm in arms[1:]:
            other = arm_figures.get(f"{mode}/{arm.name}")
            if base and other:
                result.comparisons.append(Comparison(
                    f"{mode}_{arm.name}", f"{mode}: {arm.name} tokens/s per device", "tokens/s",
                    "one device", f"{arm.name} on {arm.processes}", higher_is_better=True, target_ratio=None,
                    baseline_values=[base["tokens_per_s"]], candidate_values=[other["tokens_per_s_per_device"]],
                    first=["baseline"]))
    miscounted = {key: round(figures["engine_tokens_ratio"], 3) for key, figures in arm_figures.items()
                  if abs(figures["engine_tokens_ratio"] - 1.0) > 1e-3}
    if miscounted:
        result.notes.append(
            "the engine's tokens_seen differs from the tokens trained (ratio per arm: "
            f"{miscounted}); the figures use the tokens trained, known from the data")
    result.parameters["seconds_total"] = round(time.monotonic() - started, 1)
    folder = args.results_dir
    if folder is None and args.dry_run:
        folder = Path(tempfile.mkdtemp(prefix="tunedeck-dry-run-"))
    write_result(result, folder)
    return result


if __name__ == "__main__":
    main()
