"""GPU training throughput and MFU: tunedeck's packed path against a plain Trainer padding each batch.

    python benchmarks/gpu/train_throughput.py [--modes lora,full] [--steps 30] [--warmup 8]
    python benchmarks/gpu/train_throughput.py --dry-run      # tiny config on CPU, a few steps

One prepared script for one CUDA GPU, unattended, under 8 minutes: `--time-budget-s` holds
across and within arms. An arm that would start after it is skipped and listed; an arm
running when it runs out stops at the end of its current step, and its figures cover the
steps measured so far (`steps_measured`; an arm stopped before any measured step is listed
as skipped). Model: a ~0.5B decoder built from a
config (Qwen2-0.5B shapes, random init, nothing downloaded). Data: synthetic token ids
with a long tail of lengths (most 64-256 tokens, one in ten 1024-2048).

Arms, per mode (LoRA r=16 on all linear layers, and full fine-tuning), bf16 autocast. The base
is loaded in the dtype tunedeck uses (`base_dtype`, as in tunedeck/engine/models/model_loading.py):
bf16 for a LoRA base on a GPU (peft keeps the adapter weights fp32), fp32 for full fine-tuning,
the same for every arm of a mode so the baseline is not penalised for a choice tunedeck makes.
  baseline        transformers' Trainer, sdpa, each batch padded to its longest example
  packed_sdpa     tunedeck: best-fit packing, `PackedCollator` block-diagonal mask, host token count,
                  one packed row per micro-batch (`packing: true`'s split)
  micro_batch     tunedeck's default (`packing: "auto"`): the baseline's batches, each packed into rows
  packed_flash    the same with flash-attention 2 varlen (flattened rows), when flash_attn imports
  packed_liger    packed + Liger kernels (fused linear cross-entropy, RMSNorm, SwiGLU), when liger_kernel imports
  packed_compile  packed_sdpa rows padded to max_length (static shapes) under torch.compile (`--compile`)

Figures: non-padding tokens/s over the steps after `--warmup` (CUDA-synchronised window),
peak memory, and MFU = achieved FLOP/s / the GPU's dense bf16 peak. FLOPs per token:
6N + 12·L·d·T (PaLM's convention; T = the token's own example length, since packed
examples attend only within themselves and padding earns nothing), with 4N instead of 6N
for LoRA (the 2/3 convention: frozen weights get no weight gradients). N counts every
matmul weight (the LM head included, the embedding lookup not). Writes
benchmarks/results/gpu_train_throughput.json (+ .png).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import itertools
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.harness import BenchmarkResult, Comparison, write_result
from tunedeck.config.packed_batches import PACKED_ROWS_PER_MICRO_BATCH

IGNORE_INDEX = -100
# Dense bf16 peak per GPU (no sparsity), by a substring of the device name.
PEAK_BF16_TFLOPS = {"H200": 989.4, "H100": 989.4, "GH200": 989.4, "A100": 312.0, "L40S": 362.1, "L4": 121.0,
                    "A10G": 70.0, "RTX 4090": 165.2, "B200": 2250.0}


@dataclass(frozen=True)
class Arm:
    """One way of training the same model on the same data."""

    name: str
    packed: bool
    attn: str = "sdpa"
    micro_batch: bool = False  # the baseline's batches, each packed into rows (tunedeck's default)
    liger: bool = False
    compile: bool = False


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny config on CPU, a few steps (checks the script)")
    parser.add_argument("--modes", default="lora,full", help="comma-separated: lora, full")
    parser.add_argument("--steps", type=int, default=30, help="measured optimizer steps per arm")
    parser.add_argument("--warmup", type=int, default=8, help="steps before the measured window")
    parser.add_argument("--batch-size", type=int, default=8, help="rows per step (examples padded, or packs)")
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--examples", type=int, default=4000)
    parser.add_argument("--compile", action="store_true", help="add the torch.compile arm")
    parser.add_argument("--peak-tflops", type=float, default=None, help="override the GPU's dense bf16 peak")
    parser.add_argument("--time-budget-s", type=float, default=450.0,
                        help="start no arm after this, and stop a running one at it")
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    args.modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = sorted(set(args.modes) - {"lora", "full"})
    if unknown:
        parser.error(f"unknown mode(s) {unknown}; expected lora and/or full")
    if args.dry_run:
        args.steps, args.warmup, args.batch_size = min(args.steps, 3), min(args.warmup, 1), 2
        args.max_length, args.examples = 64, 48
    return args


def base_dtype(lora: bool, on_gpu: bool) -> Any:
    """The dtype the base model is loaded in: tunedeck's rule (tunedeck/engine/models/model_loading.py).

    A frozen LoRA base lives in half precision on an accelerator (bf16 here); weights that
    train (full fine-tuning, and the LoRA adapters, which peft keeps fp32) stay fp32 and bf16
    autocast does the math. On CPU everything is fp32.
    """
    import torch

    return torch.bfloat16 if lora and on_gpu else torch.float32


def model_config(dry_run: bool) -> Any:
    """Qwen2-0.5B shapes (or a tiny stand-in for the dry run)."""
    from transformers import Qwen2Config

    if dry_run:
        return Qwen2Config(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                           tie_word_embeddings=True)
    return Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                       tie_word_embeddings=True, rope_theta=1_000_000.0)


def synthetic_examples(count: int, vocab: int, max_length: int, seed: int = 0) -> list[dict[str, list[int]]]:
    """Token-id examples with a long tail of lengths; loss on every token but the first."""
    rng = random.Random(seed)
    short, long = (max(4, max_length // 32), max(8, max_length // 8)), (max_length // 2, max_length)
    examples = []
    for _ in range(count):
        length = rng.randint(*(long if rng.random() < 0.1 else short))
        ids = [rng.randrange(3, vocab) for _ in range(length)]
        examples.append({"input_ids": ids, "labels": [IGNORE_INDEX, *ids[1:]]})
    return examples


def matmul_parameters(config: Any) -> int:
    """N: weights every token multiplies by (layers + LM head), not the embedding lookup."""
    d, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    kv = d // config.num_attention_heads * config.num_key_value_heads
    per_layer = d * d * 2 + d * kv * 2 + 3 * d * f
    return layers * per_layer + d * config.vocab_size


def flops_per_example(config: Any, length: int, lora: bool) -> float:
    """Training FLOPs of one example: (6N or 4N)·l + 12·L·d·l² (see the module docstring)."""
    weights = (4 if lora else 6) * matmul_parameters(config) * length
    return weights + 12 * config.num_hidden_layers * config.hidden_size * length * length


def peak_flops(device_name: str, override_tflops: float | None) -> float | None:
    """The GPU's dense bf16 peak in FLOP/s, when known."""
    if override_tflops:
        return override_tflops * 1e12
    for key, tflops in PEAK_BF16_TFLOPS.items():
        if key in device_name:
            return tflops * 1e12
    return None


def available_arms(on_gpu: bool, want_compile: bool) -> tuple[list[Arm], dict[str, str]]:
    """The arms this machine can run, and why the others are skipped."""
    arms = [Arm("baseline", packed=False), Arm("packed_sdpa", packed=True),
            Arm("micro_batch", packed=False, micro_batch=True)]
    skipped: dict[str, str] = {}
    if not on_gpu:
        skipped["packed_flash"] = skipped["packed_liger"] = "needs a CUDA GPU"
    else:
        if importlib.util.find_spec("flash_attn") is not None:
            arms.append(Arm("packed_flash", packed=True, attn="flash_attention_2"))
        else:
            skipped["packed_flash"] = "flash_attn is not installed"
        if importlib.util.find_spec("liger_kernel") is not None:
            arms.append(Arm("packed_liger", packed=True, liger=True))
        else:
            skipped["packed_liger"] = "liger_kernel is not installed"
    if want_compile:
        arms.append(Arm("packed_compile", packed=True, compile=True))
    return arms, skipped


class RecordingCollator:
    """Pads (baseline) or delegates (packed), and records each batch's per-example lengths in order."""

    def __init__(self, inner: Any | None) -> None:
        self.inner = inner
        self.batches: list[list[int]] = []

    def __call__(self, features: list[dict[str, Any]]) -> Any:
        import torch

        if self.inner is None:  # as DataCollatorForSeq2Seq(padding="longest") does
            width = max(len(f["input_ids"]) for f in features)
            pad = [width - len(f["input_ids"]) for f in features]
            batch = {
                "input_ids": torch.tensor([f["input_ids"] + [0] * p for f, p in zip(features, pad, strict=True)]),
                "labels": torch.tensor([f["labels"] + [IGNORE_INDEX] * p for f, p in zip(features, pad, strict=True)]),
                "attention_mask": torch.tensor([[1] * (width - p) + [0] * p for p in pad]),
            }
            self.batches.append([width - p for p in pad])
            return batch
        if "position_ids" in features[0]:
            self.batches.append([n for f in features for n in _example_lengths(f["position_ids"])])
        else:  # whole examples, packed by the inner collator
            self.batches.append([len(f["input_ids"]) for f in features])
        return self.inner(features)


def _example_lengths(positions: list[int]) -> list[int]:
    starts = [i for i, p in enumerate(positions) if p == 0] + [len(positions)]
    return [b - a for a, b in itertools.pairwise(starts)]


class BudgetSpent(RuntimeError):
    """The time budget ran out before an arm measured any step."""


def run_arm(arm: Arm, lora: bool, config: Any, examples: list[dict[str, Any]], args: argparse.Namespace,
            device: str, out_dir: Path, deadline: float = float("inf")) -> dict[str, Any]:
    """Train `args.warmup + args.steps` steps of one arm, stopping early at `deadline` (monotonic).

    Returns its figures over the steps measured; raises BudgetSpent when none was.
    """
    from transformers import Trainer

    from tunedeck.data.packing import pack_examples, packed_features
    from tunedeck.engine.speedups.packed_attention import PackedCollator
    from tunedeck.engine.speedups.token_counting import TokenCountingCollator
    from tunedeck.engine.training.batch_collation import MicroBatchPackingCollator
    from tunedeck.engine.training.trainer import TunedeckTrainer

    on_gpu = device == "cuda"
    model, dtype = arm_model(config, arm.attn, arm.liger, lora, on_gpu)
    trainer_class: Any = Trainer
    accumulation = 1
    if arm.packed:
        rows = SimpleNamespace(input_ids=[e["input_ids"] for e in examples], labels=[e["labels"] for e in examples])
        dataset: Any = packed_features(rows, pack_examples(rows.input_ids, args.max_length))  # type: ignore[arg-type]
        trainer_class = partial(TunedeckTrainer, count_tokens_on_host=True, chunked_loss=False)
        inner = PackedCollator(arm.attn, dtype=dtype,
                               pad_to_multiple_of=args.max_length if arm.compile else None)
        collator = RecordingCollator(TokenCountingCollator(inner))
        accumulation = args.batch_size // PACKED_ROWS_PER_MICRO_BATCH  # as tunedeck trains `packing: true`
    elif arm.micro_batch:
        dataset = examples
        trainer_class = partial(TunedeckTrainer, count_tokens_on_host=True, chunked_loss=False)
        packer = MicroBatchPackingCollator(PackedCollator(arm.attn, dtype=dtype), args.max_length)
        collator = RecordingCollator(TokenCountingCollator(packer))
    else:
        dataset, collator = examples, RecordingCollator(None)
    trainer, figures = train_window(
        model, ArmTraining(dataset, collator, trainer_class, accumulation), config, lora, args, on_gpu, out_dir,
        deadline, torch_compile=arm.compile, include_num_input_tokens_seen="non_padding",
    )
    figures.update(base_dtype=str(dtype), rows=len(dataset),
                   tokens_seen_by_trainer=int(trainer.state.num_input_tokens_seen))
    del trainer, model
    release_memory(on_gpu)
    return figures


def arm_model(config: Any, attn: str, liger: bool, lora: bool, on_gpu: bool) -> tuple[Any, Any]:
    """An arm's model from `config` (seeded), with Liger kernels and a LoRA adapter when asked, and its dtype."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    dtype = base_dtype(lora, on_gpu)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=dtype)
    if liger:
        from liger_kernel.transformers import _apply_liger_kernel_to_instance

        _apply_liger_kernel_to_instance(model=model)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"))
    return model, dtype


@dataclass(frozen=True)
class ArmTraining:
    """What an arm trains on: its rows, its (recording) collator, its trainer class, and the micro-batches
    accumulated per step (each micro-batch holds `batch_size ÷ accumulation` rows)."""

    dataset: Any
    collator: RecordingCollator | Any
    trainer_class: Any
    accumulation: int = 1


def train_window(model: Any, training: ArmTraining, config: Any, lora: bool, args: argparse.Namespace,
                 on_gpu: bool, out_dir: Path, deadline: float, **options: Any) -> tuple[Any, dict[str, Any]]:
    """Train `args.warmup + args.steps` steps (stopping after the step that passes `deadline`); the trainer and
    the figures of the steps after the warm-up: tokens/s, seconds per step, achieved TFLOP/s, peak GPU memory.

    `options` go to TrainingArguments. Raises BudgetSpent when no step was measured.
    """
    import torch
    from transformers import TrainerCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    window: dict[str, float] = {}

    class Window(TrainerCallback):  # type: ignore[misc]
        def on_step_begin(self, a: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == args.warmup:
                if on_gpu:
                    torch.cuda.synchronize()
                window["start"] = time.perf_counter()

        def on_step_end(self, a: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # Checked after each step: the one running when the budget ends still counts.
            if time.monotonic() >= deadline:
                control.should_training_stop = True

        def on_train_end(self, a: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if on_gpu:
                torch.cuda.synchronize()
            window["end"] = time.perf_counter()

    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    accumulation = training.accumulation
    training_args = TrainingArguments(
        output_dir=str(out_dir), max_steps=args.warmup + args.steps,
        per_device_train_batch_size=args.batch_size // accumulation, gradient_accumulation_steps=accumulation,
        learning_rate=1e-4 if lora else 1e-5, logging_steps=10_000, save_strategy="no", report_to="none",
        disable_tqdm=True, bf16=on_gpu, use_cpu=not on_gpu, remove_unused_columns=False, dataloader_num_workers=0,
        seed=0, **options,
    )
    trainer = training.trainer_class(model=model, args=training_args, train_dataset=training.dataset,
                                     data_collator=training.collator, callbacks=[Window()])
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    steps = trainer.state.global_step - args.warmup
    if steps <= 0 or "start" not in window:
        raise BudgetSpent(f"time budget spent after {trainer.state.global_step} warm-up step(s)")
    # The data loader may fetch a batch ahead, so take the measured steps' micro-batches by position.
    measured = training.collator.batches[args.warmup * accumulation:(args.warmup + steps) * accumulation]
    seconds = window["end"] - window["start"]
    tokens = sum(sum(batch) for batch in measured)
    flops = sum(flops_per_example(config, n, lora) for batch in measured for n in batch)
    return trainer, {
        "tokens_per_s": tokens / seconds, "seconds_per_step": seconds / steps, "tokens": tokens,
        "steps_measured": steps, "stopped_by_budget": steps < args.steps, "achieved_tflops": flops / seconds / 1e12,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None,
    }


def release_memory(on_gpu: bool) -> None:
    """Give the GPU memory of an arm whose trainer and model were just dropped back before the next arm."""
    import torch

    gc.collect()
    if on_gpu:
        torch.cuda.empty_cache()


@dataclass(frozen=True)
class GpuWork:
    """What every arm of a GPU script shares: the device, its peak bf16 FLOP/s, the model config and the rows."""

    on_gpu: bool
    device: str
    device_name: str
    peak: float | None
    config: Any
    examples: list[dict[str, Any]]


def gpu_work(args: argparse.Namespace) -> GpuWork:
    """The device (a CUDA GPU, or the CPU for `--dry-run`), the model config and the synthetic examples."""
    import torch

    on_gpu = torch.cuda.is_available() and not args.dry_run
    if not on_gpu and not args.dry_run:
        raise SystemExit("no CUDA GPU: run with --dry-run to check the script on CPU")
    device_name = torch.cuda.get_device_name(0) if on_gpu else "cpu (dry run)"
    config = model_config(args.dry_run)
    return GpuWork(on_gpu, "cuda" if on_gpu else "cpu", device_name,
                   peak_flops(device_name, args.peak_tflops) if on_gpu else None, config,
                   synthetic_examples(args.examples, config.vocab_size, args.max_length))


def work_parameters(work: GpuWork, args: argparse.Namespace, skipped: dict[str, str]) -> dict[str, Any]:
    """The parameters every GPU script's result records."""
    return {"device": work.device_name, "peak_bf16_tflops": work.peak / 1e12 if work.peak else None,
            "matmul_parameters": matmul_parameters(work.config), "steps": args.steps, "warmup": args.warmup,
            "batch_size": args.batch_size, "max_length": args.max_length, "modes": args.modes,
            "skipped_arms": skipped, "time_budget_s": args.time_budget_s}


def measure_arms(arms: list[Any], args: argparse.Namespace, work: GpuWork, deadline: float,
                 skipped: dict[str, str], run_one: Callable[[Any, bool, Path], dict[str, Any]]) -> dict[str, Any]:
    """`run_one(arm, lora, scratch folder shared by the arms)` for each mode and arm until `deadline`; figures by
    "mode/arm".

    An arm that measured no step, or failed (a kernel that will not build), is recorded in `skipped`
    and the others go on.
    """
    arm_figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for mode in args.modes:
            for arm in arms:
                key = f"{mode}/{arm.name}"
                if time.monotonic() >= deadline:
                    skipped[key] = "time budget spent"
                    continue
                try:
                    figures = run_one(arm, mode == "lora", Path(folder))
                except BudgetSpent as error:
                    skipped[key] = str(error)
                    continue
                except Exception as error:  # one arm failing must not lose the rest
                    skipped[key] = f"failed: {type(error).__name__}: {error}"[:500]
                    continue
                if work.peak and "achieved_tflops" in figures:
                    figures["mfu"] = figures["achieved_tflops"] * 1e12 / work.peak
                arm_figures[key] = figures
                memory = figures.get("peak_memory_gib")
                print(f"{key:40s} {figures['tokens_per_s']:12,.0f} tok/s"
                      + (f"  {figures['achieved_tflops']:8.2f} TFLOP/s" if "achieved_tflops" in figures else "")
                      + (f"  {memory:6.1f} GiB" if memory else "")
                      + (f"  MFU {figures['mfu']:.1%}" if "mfu" in figures else ""), flush=True)
    return arm_figures


def compare_with_baseline(result: BenchmarkResult, arm_figures: dict[str, Any], modes: list[str], arms: list[Any],
                          baseline: str, candidate_prefix: str = "") -> None:
    """One tokens/s comparison per mode and arm against the `baseline` arm (the padded HF Trainer)."""
    for mode in modes:
        base = arm_figures.get(f"{mode}/{baseline}")
        for arm in arms:
            other = arm_figures.get(f"{mode}/{arm.name}")
            if base and other and arm.name != baseline:
                result.comparisons.append(Comparison(
                    f"{mode}_{arm.name}", f"{mode}: {arm.name} tokens/s", "tokens/s", "HF Trainer, sdpa, padded",
                    f"{candidate_prefix}{arm.name}", higher_is_better=True, target_ratio=None,
                    baseline_values=[base["tokens_per_s"]], candidate_values=[other["tokens_per_s"]],
                    first=["baseline"]))


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run every arm that fits the time budget and write the result."""
    args = parse_args(argv)
    started = time.monotonic()
    work = gpu_work(args)
    arms, skipped = available_arms(work.on_gpu, args.compile)
    name = "gpu_train_throughput_dry_run" if args.dry_run else "gpu_train_throughput"
    result = BenchmarkResult(name, __doc__.splitlines()[0], packages=(
        "torch", "transformers", "peft", "accelerate", "flash_attn", "liger_kernel"))
    result.parameters = {**work_parameters(work, args, skipped),
                         "base_dtype": {mode: str(base_dtype(mode == "lora", work.on_gpu)) for mode in args.modes}}

    def run_one(arm: Arm, lora: bool, scratch: Path) -> dict[str, Any]:
        return run_arm(arm, lora, work.config, work.examples, args, work.device,
                       scratch / ("lora" if lora else "full") / arm.name, started + args.time_budget_s)

    arm_figures = measure_arms(arms, args, work, started + args.time_budget_s, skipped, run_one)
    result.checks["arms"] = arm_figures
    compare_with_baseline(result, arm_figures, args.modes, arms, "baseline", candidate_prefix="tunedeck ")
    result.parameters["seconds_total"] = round(time.monotonic() - started, 1)
    write_result(result, args.results_dir)
    return result

if __name__ == "__main__":
    main()
