"""The training benchmarks' shared setup: a local bench model, length-skewed SFT data, both training arms.

* `build_bench_model`: a Llama of `layers` × `width` with the tiny BPE tokenizer, random
  init (nothing downloaded), saved as safetensors so `run_training` loads it like any
  local model.
* `write_skewed_rows`: prompt/completion rows whose token lengths have a long tail
  (p99/median ≥ 8), the shape that makes padding expensive.
* `train_plain_hf`: the baseline anyone can reproduce, a plain transformers `Trainer` with
  `DataCollatorForSeq2Seq` padding each batch to its longest example and default
  arguments otherwise. It trains on the same token ids as tunedeck (tokenized by the
  data layer, outside the timed region), so both sides see identical tokens.
* `train_tunedeck`: `run_training` on a `RunSpec`, timed from the trainer's first to last
  hook through a progress sink, the same window the baseline's callback times.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IGNORE_INDEX = -100


@dataclass
class TrainingTiming:
    """One training run as both arms report it."""

    seconds: float  # the trainer's loop, from on_train_begin to on_train_end
    steps: int
    tokens: int  # non-padding tokens trained on (every epoch)
    losses: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        """Non-padding tokens per second of the training loop."""
        return self.tokens / self.seconds

    cpu_seconds: float = 0.0  # this process's CPU time over the same window

    @property
    def seconds_per_step(self) -> float:
        """Mean optimizer-step time."""
        return self.seconds / max(1, self.steps)

    @property
    def cpu_seconds_per_step(self) -> float:
        """Mean optimizer-step CPU time of this process."""
        return self.cpu_seconds / max(1, self.steps)


def lm_benchmark_parser(description: str, *, rows: int, repeats: int, threads: bool = False) -> argparse.ArgumentParser:
    """The options every tiny-Llama training benchmark takes; a benchmark adds its own after these.

    `--rows` and `--repeats` get the benchmark's defaults; `threads` adds `--threads` (torch
    intra-op threads on both sides, applied by `parse_lm_arguments`).
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rows", type=int, default=rows)
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    if threads:
        parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads on both sides")
    parser.add_argument("--results-dir", type=Path, default=None)
    return parser


def parse_lm_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, silence transformers' progress output and, when the parser has `--threads`, set torch's threads."""
    args = parser.parse_args(argv)
    quiet_transformers()
    if getattr(args, "threads", None) is not None:
        import torch

        torch.set_num_threads(args.threads)
    return args


def quiet_transformers() -> None:
    """No progress bars or warnings from transformers while benchmarking (they cost time and clutter)."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def build_bench_model(folder: Path, *, layers: int = 4, width: int = 256, seed: int = 0,
                      vocab_size: int | None = None) -> Path:
    """Save a random-init Llama (`layers` × `width`) and the tiny tokenizer into `folder`.

    `vocab_size` widens the embedding and output head beyond the tokenizer's few hundred
    tokens (the extra ids never occur), for benchmarks whose cost grows with the vocabulary.
    """
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from tunedeck.demo.tiny_corpus import builtin_corpus
    from tunedeck.demo.tiny_models import MAX_POSITIONS, build_tokenizer

    torch.manual_seed(seed)
    tokenizer = build_tokenizer(builtin_corpus(), "llama")
    config = LlamaConfig(
        hidden_size=width,
        intermediate_size=width * 8 // 3 // 64 * 64 or 4 * width,
        num_hidden_layers=layers,
        num_attention_heads=max(1, width // 64),
        num_key_value_heads=max(1, width // 128),
        max_position_embeddings=MAX_POSITIONS,
        vocab_size=max(vocab_size or 0, len(tokenizer)),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    model = AutoModelForCausalLM.from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def write_skewed_rows(path: Path, count: int, *, seed: int = 0, tail_share: float = 0.04,
                      tail_sentences: tuple[int, int] = (14, 24)) -> None:
    """Prompt/completion rows: most answers one sentence, a `tail_share` of them very long."""
    from tunedeck.demo.tiny_corpus import builtin_corpus

    rng = random.Random(seed)
    sentences = builtin_corpus()
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            long = rng.random() < tail_share
            answer_sentences = rng.randint(*tail_sentences) if long else 1
            prompt = f"Q{i}: " + rng.choice(sentences) + "\nA:"
            completion = " " + " ".join(rng.choice(sentences) for _ in range(answer_sentences))
            handle.write(json.dumps({"prompt": prompt, "completion": completion}) + "\n")


def tokenize_file(model_dir: Path, rows_path: Path, max_length: int) -> Any:
    """The data layer's tokenization (loss on completions only): a `TokenizedRows`."""
    from transformers import AutoTokenizer

    from tunedeck.data.loading import load_dataset
    from tunedeck.data.tokenize import tokenize_rows

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    loaded = load_dataset(rows_path)
    return tokenize_rows(loaded.rows, loaded.kind, tokenizer, max_length=max_length)


def as_examples(tokenized: Any) -> list[dict[str, list[int]]]:
    """`TokenizedRows` as the list of `input_ids`/`labels` dicts a plain Trainer takes."""
    return [{"input_ids": list(ids), "labels": list(labels)}
            for ids, labels in zip(tokenized.input_ids, tokenized.labels, strict=True)]


def length_stats(examples: list[dict[str, list[int]]]) -> dict[str, float]:
    """Token length median, p99, max and their ratio."""
    from benchmarks.harness import percentile

    lengths = [len(example["input_ids"]) for example in examples]
    median = statistics.median(lengths)
    p99 = percentile(lengths, 0.99)
    return {"examples": len(lengths), "tokens": sum(lengths), "median": median, "p99": p99,
            "max": max(lengths), "p99_over_median": p99 / median}


def bench_config(**overrides: Any) -> dict[str, Any]:
    """The job config both arms follow (fp32, full fine-tuning, no checkpoints, no evaluation)."""
    config: dict[str, Any] = {
        "epochs": 1,
        "batch_size": 8,
        "learning_rate": 1e-4,
        "weight_decay": 0.0,
        "lr_scheduler": "linear",
        "max_grad_norm": 1.0,
        "warmup_ratio": 0.0,
        "max_length": 512,
        "gradient_accumulation_steps": 1,
        "mixed_precision": "fp32",
        "gradient_checkpointing": False,  # the config default is on; a 3M-parameter model does not need it
        "use_peft": False,
        "save_strategy": "no",
        "eval_strategy": "no",
        "logging_steps": 10,
        "seed": 0,
        # Off unless a benchmark measures it: the baseline pads every batch.
        "packing": False,
        # Off unless a benchmark measures it: the baseline computes the stock loss over full logits.
        "chunked_cross_entropy": False,
    }
    config.update(overrides)
    return config


def train_plain_hf(model_dir: Path, examples: list[dict[str, list[int]]], config: dict[str, Any],
                   out_dir: Path, *, callbacks: list[Any] | None = None) -> TrainingTiming:
    """The baseline: transformers' Trainer, padding each batch to its longest example."""
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForSeq2Seq,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        set_seed,
    )
    from transformers.trainer_callback import PrinterCallback

    set_seed(config["seed"])
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    window = TrainingWindowCallback(TrainerCallback)
    args = TrainingArguments(
        output_dir=str(out_dir),
        num_train_epochs=config["epochs"],
        per_device_train_batch_size=config["batch_size"],
        gradient_accumulation_steps=config["gradient_accumulation_steps"],
        learning_rate=config["learning_rate"],
        weight_decay=config["weight_decay"],
        lr_scheduler_type=config["lr_scheduler"],
        max_grad_norm=config["max_grad_norm"],
        activation_checkpointing=config["gradient_checkpointing"],
        logging_steps=config["logging_steps"],
        save_strategy=config["save_strategy"],
        save_steps=config.get("save_steps", 500),
        eval_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=config["seed"],
        use_cpu=not torch.cuda.is_available(),
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=examples,
        data_collator=DataCollatorForSeq2Seq(tokenizer, padding="longest", label_pad_token_id=IGNORE_INDEX),
        callbacks=[window.callback, *(callbacks or [])],
    )
    # tunedeck drops the trainer's printing too (its progress goes to events): like for like.
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    tokens = sum(len(example["input_ids"]) for example in examples) * int(config["epochs"])
    return TrainingTiming(window.seconds, int(trainer.state.global_step), tokens, losses,
                          cpu_seconds=window.cpu_seconds)


def train_tunedeck(model_dir: Path, rows_path: Path, config: dict[str, Any], out_dir: Path,
                   tokens: int) -> TrainingTiming:
    """`run_training` as the CLI and the worker call it, timed over the trainer's loop.

    `out_dir` must not exist (a fresh run directory each time).
    """
    from tunedeck.config.loading import validate_config
    from tunedeck.engine.models.model_source import ModelRef
    from tunedeck.engine.training.run_spec import RunSpec
    from tunedeck.engine.training.training_run import run_training

    sink = _TimingSink()
    spec = RunSpec(config=validate_config(config), model=ModelRef(str(model_dir)), train_path=rows_path,
                   out_dir=out_dir)
    result = run_training(spec, progress=sink)
    events = [json.loads(line) for line in (out_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    losses = [float(event["loss"]) for event in events if event.get("type") == "metric"]
    return TrainingTiming(sink.seconds, result.global_step, tokens * int(config["epochs"]), losses,
                          {"diagnostics": result.diagnostics}, cpu_seconds=sink.cpu_seconds)


class StepWindowTimer:
    """Times each optimizer step from its `on_step_begin` to the next one, for any Trainer in this process.

    The window holds the step's compute, its callbacks and its logging, so a cost of
    tunedeck's own shows up; the median over steps shrugs off bursts of a shared machine.
    Both clocks are kept: wall time, and this process's CPU time, which other processes on
    the machine do not inflate (with one torch thread, it is the step's own work).
    """

    def __init__(self) -> None:
        self.starts: list[tuple[float, float]] = []
        self._saved: Any = None

    def __enter__(self) -> StepWindowTimer:
        from transformers.trainer_callback import CallbackHandler

        original = self._saved = CallbackHandler.on_step_begin
        timer = self

        def on_step_begin(handler: Any, *args: Any, **kwargs: Any) -> Any:
            timer.starts.append((time.perf_counter(), time.process_time()))
            return original(handler, *args, **kwargs)

        CallbackHandler.on_step_begin = on_step_begin  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from transformers.trainer_callback import CallbackHandler

        CallbackHandler.on_step_begin = self._saved  # type: ignore[method-assign]

    def median_step_seconds(self, *, cpu: bool = False) -> float:
        """Median of the complete step windows (the first step, with its one-off setup, left out)."""
        clock = 1 if cpu else 0
        windows = [b[clock] - a[clock] for a, b in itertools.pairwise(self.starts)][1:]
        return statistics.median(windows)


class _TimingSink:
    """A progress sink that only notes when the loop starts and ends."""

    def __init__(self) -> None:
        self.started = self.seconds = self.cpu_started = self.cpu_seconds = 0.0

    def start(self, total_steps: int, first_step: int) -> None:
        self.started, self.cpu_started = time.perf_counter(), time.process_time()

    def update(self, step: int, metrics: dict[str, Any]) -> None:
        pass

    def finish(self) -> None:
        self.seconds = time.perf_counter() - self.started
        self.cpu_seconds = time.process_time() - self.cpu_started


class TrainingWindowCallback:
    """The training loop's span, wall and CPU time, from `on_train_begin` to `on_train_end`: the hooks
    tunedeck's own timing uses, so a baseline Trainer is timed over the same window."""

    def __init__(self, base: type) -> None:
        self.started = self.seconds = self.cpu_started = self.cpu_seconds = 0.0
        owner = self

        class Window(base):  # type: ignore[misc, valid-type]
            def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                owner.started, owner.cpu_started = time.perf_counter(), time.process_time()

            def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                owner.seconds = time.perf_counter() - owner.started
                owner.cpu_seconds = time.process_time() - owner.cpu_started

        self.callback = Window()
