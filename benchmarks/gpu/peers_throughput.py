"""GPU peers: tunedeck's fast paths (flash varlen, Liger, fused AdamW) beside TRL's and LLaMA-Factory's GPU settings.

    python benchmarks/gpu/peers_throughput.py [--modes lora,full] [--steps 20] [--warmup 5]
    python benchmarks/gpu/peers_throughput.py --dry-run     # tiny config on CPU: the arms that need no GPU

One prepared script for one CUDA GPU, unattended, under 8 minutes (`--time-budget-s`, 420 s
by default, holds across and within arms, as in benchmarks/gpu/train_throughput.py, whose
model, data, dtype rule and FLOP accounting it reuses: Qwen2-0.5B shapes from a config,
synthetic token ids with a long tail of lengths, bf16 autocast, LoRA r=16 on all linear
layers or full fine-tuning). Every arm trains with transformers' default optimizer, fused
AdamW (`adamw_torch_fused`, also what tunedeck's `optim: adamw` is), except the one arm that
measures what the fused kernel buys.

Arms, per mode; an arm whose package does not import is skipped with its reason printed:
  hf_padded                     transformers' Trainer, sdpa, each batch padded (the baseline)
  tunedeck_auto                 tunedeck's default: each batch of examples packed into rows, sdpa
  tunedeck_packed               whole-dataset packing, block-diagonal mask, sdpa, one packed row per micro-batch
  tunedeck_packed_flash         the same through flash-attention 2 varlen (needs flash_attn)
  tunedeck_packed_liger         packed + Liger kernels: fused linear cross-entropy, RMSNorm, SwiGLU (needs liger_kernel)
  tunedeck_packed_foreach_adamw packed with the unfused (foreach) AdamW: the fused kernel's share
  trl_padding_free_sdpa         TRL's SFTTrainer collator, padding_free=True, sdpa (needs trl)
  trl_padding_free_flash        the same on flash-attention 2, TRL's recommended GPU setting (needs trl, flash_attn)
  llamafactory_neat_packing     LLaMA-Factory's neat_packing in its own environment (`--llamafactory-python`,
                                which must import llamafactory and see the GPU; see benchmarks/peers_venv.py)

Figures: non-padding tokens/s over the steps after `--warmup` (CUDA-synchronised), peak GPU
memory and MFU, each arm side by side with hf_padded. Writes
benchmarks/results/gpu_peers_throughput.json (+ .png).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.gpu.train_throughput import (
    ArmTraining,
    BudgetSpent,
    RecordingCollator,
    arm_model,
    compare_with_baseline,
    gpu_work,
    measure_arms,
    release_memory,
    train_window,
    work_parameters,
)
from benchmarks.harness import BenchmarkResult, write_result
from tunedeck.config.packed_batches import PACKED_ROWS_PER_MICRO_BATCH

ROOT = Path(__file__).resolve().parents[2]
FUSED, FOREACH = "adamw_torch_fused", "adamw_torch"


@dataclass(frozen=True)
class PeerArm:
    """One way of training the same model on the same ids."""

    name: str
    tool: str  # "hf", "tunedeck", "trl" or "llamafactory"
    layout: str  # "padded", "micro_batch", "packed" or "padding_free"
    attn: str = "sdpa"
    liger: bool = False
    optim: str = FUSED
    needs: tuple[str, ...] = ()  # importable modules the arm cannot run without


ARMS = (
    PeerArm("hf_padded", "hf", "padded"),
    PeerArm("tunedeck_auto", "tunedeck", "micro_batch"),
    PeerArm("tunedeck_packed", "tunedeck", "packed"),
    PeerArm("tunedeck_packed_flash", "tunedeck", "packed", attn="flash_attention_2", needs=("flash_attn",)),
    PeerArm("tunedeck_packed_liger", "tunedeck", "packed", liger=True, needs=("liger_kernel",)),
    PeerArm("tunedeck_packed_foreach_adamw", "tunedeck", "packed", optim=FOREACH),
    PeerArm("trl_padding_free_sdpa", "trl", "padding_free", needs=("trl",)),
    PeerArm("trl_padding_free_flash", "trl", "padding_free", attn="flash_attention_2", needs=("trl", "flash_attn")),
    PeerArm("llamafactory_neat_packing", "llamafactory", "packed"),
)
ARM_NAMES = tuple(arm.name for arm in ARMS)
DEFAULT_LLAMAFACTORY_PYTHON = ROOT / "benchmarks" / ".peers" / "llamafactory-venv" / "bin" / "python"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny config on CPU, a few steps (checks the script)")
    parser.add_argument("--modes", default="lora,full", help="comma-separated: lora, full")
    parser.add_argument("--arms", default=",".join(ARM_NAMES), help="comma-separated subset of the arms")
    parser.add_argument("--steps", type=int, default=20, help="measured optimizer steps per arm")
    parser.add_argument("--warmup", type=int, default=5, help="steps before the measured window")
    parser.add_argument("--batch-size", type=int, default=8, help="rows per step (examples padded, or packs)")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--peak-tflops", type=float, default=None, help="override the GPU's dense bf16 peak")
    parser.add_argument("--time-budget-s", type=float, default=420.0,
                        help="start no arm after this, and stop a running one at it")
    parser.add_argument("--llamafactory-python", type=Path, default=DEFAULT_LLAMAFACTORY_PYTHON,
                        help="a Python whose environment has llamafactory and a CUDA torch")
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if not args.modes or set(args.modes) - {"lora", "full"}:
        parser.error(f"--modes takes lora and/or full, not {','.join(args.modes) or 'nothing'}")
    args.arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    unknown = [arm for arm in args.arms if arm not in ARM_NAMES]
    if unknown or not args.arms:
        parser.error(f"unknown arm(s) {unknown}; expected some of {', '.join(ARM_NAMES)}")
    if args.dry_run:
        args.steps, args.warmup, args.batch_size = min(args.steps, 3), min(args.warmup, 1), 2
        args.max_length, args.examples = 64, 48
    return args


def module_installed(name: str) -> bool:
    """Whether `name` can be imported here (found, not imported: a broken kernel build fails later, per arm)."""
    return importlib.util.find_spec(name) is not None


def fused_adamw_available(on_gpu: bool) -> bool:
    """torch's fused AdamW kernel: a `fused` argument, on CUDA (transformers picks it by default there)."""
    import torch

    return on_gpu and "fused" in inspect.signature(torch.optim.AdamW).parameters


def llamafactory_ready(python: Path, on_gpu: bool) -> str | None:
    """None when `python` imports llamafactory and sees a CUDA GPU, else why not."""
    if not on_gpu:
        return "needs a CUDA GPU"
    if not python.exists():
        return f"no LLaMA-Factory environment at {python} (see benchmarks/peers_venv.py; it needs a CUDA torch here)"
    check = "import torch, llamafactory.train.tuner; raise SystemExit(0 if torch.cuda.is_available() else 3)"
    try:
        code = subprocess.call([str(python), "-c", check], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=180)
    except subprocess.TimeoutExpired:
        return "importing llamafactory took over 180 s"
    if code == 3:
        return f"the torch of {python} sees no CUDA GPU (a CPU build)"
    return None if code == 0 else f"{python} cannot import llamafactory (exit {code})"


def select_arms(wanted: list[str], on_gpu: bool, installed: Any = module_installed, fused: bool = True,
                llamafactory_problem: str | None = None) -> tuple[list[PeerArm], dict[str, str]]:
    """The arms this machine runs, in order, and the reason each other wanted arm is skipped.

    `installed(name)` says whether a module imports; `fused` whether the fused AdamW kernel is
    there (without it every arm falls back to the foreach AdamW and the comparison arm is moot).
    """
    chosen: list[PeerArm] = []
    skipped: dict[str, str] = {}
    for arm in ARMS:
        if arm.name not in wanted:
            continue
        missing = [name for name in arm.needs if not installed(name)]
        if arm.attn == "flash_attention_2" and not on_gpu:
            skipped[arm.name] = "flash-attention needs a CUDA GPU"
        elif arm.liger and not on_gpu:
            skipped[arm.name] = "Liger kernels need a CUDA GPU"
        elif missing:
            skipped[arm.name] = f"{', '.join(missing)} is not installed"
        elif arm.optim == FOREACH and not fused:
            skipped[arm.name] = "no fused AdamW here: every arm already uses the foreach one"
        elif arm.tool == "llamafactory" and llamafactory_problem is not None:
            skipped[arm.name] = llamafactory_problem
        else:
            chosen.append(arm if fused or arm.optim == FOREACH else PeerArm(**{**arm.__dict__, "optim": FOREACH}))
    return chosen, skipped


def arm_data(arm: PeerArm, examples: list[dict[str, Any]], max_length: int, dtype: Any) -> tuple[Any, Any, Any]:
    """(dataset, collator, trainer class) of an in-process arm."""
    from transformers import Trainer

    from tunedeck.data.packing import pack_examples, packed_features
    from tunedeck.engine.speedups.packed_attention import PackedCollator
    from tunedeck.engine.speedups.token_counting import TokenCountingCollator
    from tunedeck.engine.training.batch_collation import MicroBatchPackingCollator
    from tunedeck.engine.training.trainer import TunedeckTrainer

    tunedeck_trainer = partial(TunedeckTrainer, count_tokens_on_host=True, chunked_loss=False)
    if arm.layout == "packed":
        rows = SimpleNamespace(input_ids=[e["input_ids"] for e in examples], labels=[e["labels"] for e in examples])
        dataset = packed_features(rows, pack_examples(rows.input_ids, max_length))  # type: ignore[arg-type]
        return dataset, RecordingCollator(TokenCountingCollator(PackedCollator(arm.attn, dtype=dtype))), \
            tunedeck_trainer
    if arm.layout == "micro_batch":
        packer = MicroBatchPackingCollator(PackedCollator(arm.attn, dtype=dtype), max_length)
        return examples, RecordingCollator(TokenCountingCollator(packer)), tunedeck_trainer
    if arm.layout == "padding_free":
        from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

        return examples, RecordingCollator(DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)), Trainer
    return examples, RecordingCollator(None), Trainer


def run_in_process(arm: PeerArm, lora: bool, config: Any, examples: list[dict[str, Any]], args: argparse.Namespace,
                   device: str, out_dir: Path, deadline: float) -> dict[str, Any]:
    """Train `args.warmup + args.steps` steps of an hf, tunedeck or TRL arm; its figures (BudgetSpent if none)."""
    on_gpu = device == "cuda"
    model, dtype = arm_model(config, arm.attn, arm.liger, lora, on_gpu)
    dataset, collator, trainer_class = arm_data(arm, examples, args.max_length, dtype)
    # Whole-dataset packing trains as tunedeck runs it: one packed row per micro-batch, a step's rows accumulated.
    accumulation = args.batch_size // PACKED_ROWS_PER_MICRO_BATCH if arm.layout == "packed" else 1
    trainer, figures = train_window(model, ArmTraining(dataset, collator, trainer_class, accumulation), config, lora,
                                    args, on_gpu, out_dir, deadline, optim=arm.optim if on_gpu else FOREACH)
    figures.update(attn=arm.attn, optim=str(getattr(trainer.args.optim, "value", trainer.args.optim)))
    del trainer, model
    release_memory(on_gpu)
    return figures


def run_llamafactory(lora: bool, config: Any, examples: list[dict[str, Any]], args: argparse.Namespace,
                     scratch: Path, deadline: float) -> dict[str, Any]:
    """LLaMA-Factory's neat_packing in its environment (benchmarks/peers_llamafactory.py), bounded by `deadline`.

    Its figures are over its whole loop (warm-up steps included: its process reports no
    per-step window), so they understate it slightly, and its tokens are its steps' share of
    the packed rows' tokens (the rows a step takes are shuffled); the JSON says both.
    """
    import torch
    from transformers import AutoModelForCausalLM

    work = scratch / "llamafactory-work"
    if not (work / "model").exists():
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.save_pretrained(work / "model", safe_serialization=True)
        _save_stand_in_tokenizer(work / "model", config.vocab_size)
        del model
    (work / "ids.json").write_text(json.dumps({"input_ids": [e["input_ids"] for e in examples],
                                               "labels": [e["labels"] for e in examples]}), encoding="utf-8")
    tokens_total = sum(len(e["input_ids"]) for e in examples)
    settings = {"batch_size": args.batch_size, "learning_rate": 1e-4 if lora else 1e-5, "max_length": args.max_length,
                "seed": 0, "lora_r": 16, "lora_alpha": 32, "tokens": tokens_total, "bf16": True,
                "max_steps": args.warmup + args.steps, "attn": "sdpa"}
    (work / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    out = scratch / f"llamafactory-{'lora' if lora else 'full'}.json"
    command = [str(args.llamafactory_python), str(ROOT / "benchmarks" / "peers_llamafactory.py"),
               "--arm", "llamafactory_neat_packing", "--mode", "lora" if lora else "full", "--work", str(work),
               "--out", str(out), "--run-dir", str(scratch / "llamafactory-run")]
    remaining = max(1.0, deadline - time.monotonic())
    try:
        code = subprocess.call(command, cwd=ROOT, timeout=remaining)
    except subprocess.TimeoutExpired as error:
        raise BudgetSpent("time budget spent while LLaMA-Factory ran") from error
    if code != 0 or not out.exists():
        raise RuntimeError(f"LLaMA-Factory's run failed (exit {code})")
    figures = json.loads(out.read_text(encoding="utf-8"))
    return {"tokens_per_s": figures["tokens"] / figures["seconds"], "seconds": figures["seconds"],
            "tokens": figures["tokens"], "tokens_estimated": figures.get("tokens_estimated", False),
            "steps": figures["steps"], "window": "whole loop, warm-up included",
            "peak_memory_gib": figures.get("peak_gpu_memory_gib"), "versions": figures.get("versions")}


def _save_stand_in_tokenizer(folder: Path, vocab_size: int) -> None:
    """A word-level tokenizer of `vocab_size` ids: LLaMA-Factory loads one, though the ids arrive tokenized."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(vocab_size)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="t2"))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="t0", bos_token="t1", eos_token="t2",
                                        unk_token="t2")
    tokenizer.save_pretrained(folder)


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run every arm that installs and fits the time budget; write the result."""
    args = parse_args(argv)
    started = time.monotonic()
    work = gpu_work(args)
    on_gpu = work.on_gpu
    problem = llamafactory_ready(args.llamafactory_python, on_gpu) if "llamafactory_neat_packing" in args.arms \
        else None
    arms, skipped = select_arms(args.arms, on_gpu, fused=fused_adamw_available(on_gpu) or not on_gpu,
                                llamafactory_problem=problem)
    for name, why in skipped.items():
        print(f"skipping {name}: {why}", flush=True)
    name = "gpu_peers_throughput_dry_run" if args.dry_run else "gpu_peers_throughput"
    result = BenchmarkResult(name, __doc__.splitlines()[0], packages=(
        "torch", "transformers", "peft", "trl", "accelerate", "flash_attn", "liger_kernel"))
    result.parameters = {**work_parameters(work, args, skipped), "arms": [arm.name for arm in arms]}
    deadline = started + args.time_budget_s

    def run_one(arm: PeerArm, lora: bool, scratch: Path) -> dict[str, Any]:
        if arm.tool == "llamafactory":
            return run_llamafactory(lora, work.config, work.examples, args, scratch, deadline)
        return run_in_process(arm, lora, work.config, work.examples, args, work.device,
                              scratch / ("lora" if lora else "full") / arm.name, deadline)

    arm_figures = measure_arms(arms, args, work, deadline, skipped, run_one)
    result.checks["arms"] = arm_figures
    compare_with_baseline(result, arm_figures, args.modes, arms, "hf_padded")
    result.parameters["seconds_total"] = round(time.monotonic() - started, 1)
    write_result(result, args.results_dir)
    return result

if __name__ == "__main__":
    main()
