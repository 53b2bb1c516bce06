"""LLaMA-Factory's arms of the peers benchmark, run by the Python of LLaMA-Factory's own virtual environment.

    benchmarks/.peers/llamafactory-venv/bin/python benchmarks/peers_llamafactory.py \
        --arm llamafactory_neat_packing --mode lora --work DIR --out arm.json --run-dir RUN

Standalone on purpose (standard library, llamafactory, datasets): that environment has
LLaMA-Factory's pins of transformers, peft and trl, not tunedeck. The shared ids and labels
(`DIR/ids.json`) go through LLaMA-Factory's own dataset processors, with their per-example
encoding replaced by a look-up of the shared ids: `SupervisedDatasetProcessor` for the
padded arm, `PackedSupervisedDatasetProcessor` (its greedy knapsack, segment-numbered
attention masks) for `neat_packing`. The result is saved where `tokenized_path` loads it,
and `run_exp` trains from it with its own collator (the 4D block-diagonal mask for
neat_packing) and trainer. Writes the same figures as `benchmarks/peers_arms.py`.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ARMS = ("llamafactory_padded", "llamafactory_neat_packing")


def cutoff_length(max_length: int) -> int:
    """LLaMA-Factory's `cutoff_len` for the shared `max_length`: the next length whose packed rows fit its collator.

    Its packed rows hold `cutoff_len + 1` tokens, and its collator pads `input_ids` to a multiple
    of 8 but not the packed `position_ids`, so 0.9.5 fails on rows of 513 ("The size of tensor a
    (520) must match the size of tensor b (513)"). Rows of a multiple of 8 avoid that; the few
    extra tokens of room favour LLaMA-Factory's packing slightly, never tunedeck.
    """
    return (max_length + 1 + 7) // 8 * 8 - 1


def tokenized_dataset(shared: dict[str, list[list[int]]], cutoff_len: int, neat_packing: bool, folder: Path) -> int:
    """LLaMA-Factory's processed dataset of the shared ids, saved to `folder`; its row count."""
    from datasets import Dataset, DatasetDict
    from llamafactory.data.processor.supervised import PackedSupervisedDatasetProcessor, SupervisedDatasetProcessor

    base = PackedSupervisedDatasetProcessor if neat_packing else SupervisedDatasetProcessor

    class SharedIds(base):  # type: ignore[misc, valid-type]
        def _encode_data_example(self, prompt: list[dict[str, str]], *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            index = int(prompt[0]["content"])  # the row number stands in for the text
            return list(shared["input_ids"][index]), list(shared["labels"][index])

    count = len(shared["input_ids"])
    examples = {"_prompt": [[{"role": "user", "content": str(i)}] for i in range(count)],
                "_response": [[{"role": "assistant", "content": ""}] for _ in range(count)],
                "_system": [None] * count, "_tools": [None] * count, "_images": [None] * count,
                "_videos": [None] * count, "_audios": [None] * count}
    processor = SharedIds(template=None, tokenizer=SimpleNamespace(pad_token_id=0), processor=None,
                          data_args=SimpleNamespace(cutoff_len=cutoff_len, neat_packing=neat_packing))
    rows = processor.preprocess_dataset(examples)
    DatasetDict({"train": Dataset.from_dict(dict(rows))}).save_to_disk(str(folder))
    return len(rows["input_ids"])


def run(arm: str, mode: str, work: Path, run_dir: Path) -> dict[str, Any]:
    """Train one LLaMA-Factory arm; its figures."""
    from importlib import metadata

    from llamafactory.train.tuner import run_exp
    from transformers import TrainerCallback

    settings = json.loads((work / "settings.json").read_text(encoding="utf-8"))
    shared = json.loads((work / "ids.json").read_text(encoding="utf-8"))
    neat = arm == "llamafactory_neat_packing"
    run_dir.mkdir(parents=True, exist_ok=True)
    cutoff = cutoff_length(settings["max_length"])
    rows = tokenized_dataset(shared, cutoff, neat, run_dir / "tokenized")
    window: dict[str, float] = {}
    losses: list[float] = []
    steps: list[int] = []

    class Record(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            window["start"], window["cpu_start"] = time.perf_counter(), time.process_time()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            window["seconds"] = time.perf_counter() - window["start"]
            window["cpu_seconds"] = time.process_time() - window["cpu_start"]
            steps.append(int(state.global_step))

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    lora = mode == "lora"
    options: dict[str, Any] = {
        "model_name_or_path": str(work / "model"), "stage": "sft", "do_train": True,
        "finetuning_type": "lora" if lora else "full", "template": "empty",
        # A dataset name is required even though `tokenized_path` is what loads.
        "dataset": "identity", "tokenized_path": str(run_dir / "tokenized"),
        "cutoff_len": cutoff, "packing": neat, "neat_packing": neat,
        "output_dir": str(run_dir / "out"), "overwrite_output_dir": True,
        "per_device_train_batch_size": settings["batch_size"], "gradient_accumulation_steps": 1,
        "learning_rate": settings["learning_rate"], "num_train_epochs": 1.0, "lr_scheduler_type": "linear",
        "warmup_ratio": 0.0, "weight_decay": 0.0, "max_grad_norm": 1.0, "logging_steps": 1,
        "save_strategy": "no", "report_to": "none", "seed": settings["seed"], "plot_loss": False,
        "flash_attn": {"sdpa": "sdpa", "flash_attention_2": "fa2"}[settings.get("attn", "sdpa")],
        "disable_tqdm": True, "bf16": bool(settings.get("bf16", False)), "fp16": False,
    }
    if settings.get("max_steps"):  # the GPU script bounds its arms by steps, not epochs
        options["max_steps"] = int(settings["max_steps"])
    if lora:
        options.update({"lora_rank": settings["lora_r"], "lora_alpha": settings["lora_alpha"], "lora_dropout": 0.0,
                        "lora_target": "all"})
    run_exp(args=options, callbacks=[Record()])
    import torch

    gpu_peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
    versions = {}
    for name in ("llamafactory", "torch", "transformers", "peft", "trl", "accelerate", "datasets"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "absent"
    trained_steps = steps[-1] if steps else 0
    tokens = int(settings["tokens"])
    if settings.get("max_steps"):
        # A run bounded by steps trains only part of the epoch, in shuffled order: its share of the
        # dataset's tokens, by the rows its steps took (an estimate, flagged as one).
        tokens = round(tokens * min(1.0, trained_steps * settings["batch_size"] / max(1, rows)))
    return {"seconds": window["seconds"], "cpu_seconds": window["cpu_seconds"], "steps": trained_steps,
            "tokens": tokens, "tokens_estimated": bool(settings.get("max_steps")), "losses": losses, "rows": rows,
            "cutoff_len": cutoff,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_gpu_memory_gib": gpu_peak, "versions": versions}


def main() -> None:
    """Run the arm named on the command line and write its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", required=True, choices=ARMS)
    parser.add_argument("--mode", required=True, choices=("lora", "full"))
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    args = parser.parse_args()
    figures = run(args.arm, args.mode, args.work, args.run_dir)
    args.out.write_text(json.dumps(figures), encoding="utf-8")


if __name__ == "__main__":
    main()
