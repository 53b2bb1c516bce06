"""One arm of the peers benchmark in its own process: tunedeck or TRL, on the shared model and ids.

    python -m benchmarks.peers_arms --arm trl_padding_free --mode lora --work DIR --out arm.json

`DIR` holds what `benchmarks/peers.py` prepared: `model/`, `rows.jsonl`, `ids.json` (the rows
tokenized once by tunedeck's data layer) and `settings.json` (the job every tool follows).
The arm trains one epoch and writes its figures to `--out`: the training loop's seconds
(first to last trainer hook), the non-padding tokens it trained on, its per-step losses and
this process's peak RSS. Each arm is a fresh process, so its peak RSS is its own.

Arms: `tunedeck_unpacked` (packing: false, the loss reference), `tunedeck_auto`
(packing: "auto", the default), `tunedeck_packed` (packing: true, the whole dataset packed),
`trl_padded` and `trl_padding_free` (TRL's SFTTrainer fed the shared ids and labels as a
tokenized dataset, so nothing is re-tokenized). LLaMA-Factory's arms run in their own
virtual environment (`benchmarks/peers_llamafactory.py`).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TUNEDECK_PACKING: dict[str, bool | str] = {"tunedeck_unpacked": False, "tunedeck_auto": "auto",
                                           "tunedeck_packed": True}
TRL_ARMS = ("trl_padded", "trl_padding_free")
ARMS = (*TUNEDECK_PACKING, *TRL_ARMS)


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tunedeck_config(settings: dict[str, Any], lora: bool, packing: bool | str) -> dict[str, Any]:
    """The job as a tunedeck config: the shared settings, tunedeck's defaults for everything else."""
    from benchmarks.lm_setup import bench_config

    config = bench_config(
        batch_size=settings["batch_size"], learning_rate=settings["learning_rate"],
        max_length=settings["max_length"], logging_steps=1, seed=settings["seed"], use_peft=lora,
        lora_r=settings["lora_r"], lora_alpha=settings["lora_alpha"], lora_dropout=0.0,
        lora_target_modules="all-linear", packing=packing, attn_implementation="sdpa",
    )
    # The chunked loss is tunedeck's own default: the comparison is tunedeck as a user gets it.
    config.pop("chunked_cross_entropy")
    return config


def run_tunedeck(work: Path, settings: dict[str, Any], lora: bool, packing: bool | str,
                 out_dir: Path) -> dict[str, Any]:
    """`run_training` on the chat rows (tokenized by the same data-layer call as `ids.json`)."""
    from benchmarks.lm_setup import train_tunedeck

    config = tunedeck_config(settings, lora, packing)
    timing = train_tunedeck(work / "model", work / "rows.jsonl", config, out_dir, int(settings["tokens"]))
    return {"seconds": timing.seconds, "cpu_seconds": timing.cpu_seconds, "steps": timing.steps,
            "tokens": timing.tokens, "losses": timing.losses}


def run_trl(work: Path, settings: dict[str, Any], lora: bool, padding_free: bool, out_dir: Path) -> dict[str, Any]:
    """TRL's SFTTrainer on the shared ids and labels (a tokenized dataset: TRL prepares nothing)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    from benchmarks.lm_setup import TrainingWindowCallback

    shared = json.loads((work / "ids.json").read_text(encoding="utf-8"))
    dataset = Dataset.from_dict({"input_ids": shared["input_ids"], "labels": shared["labels"]})
    tokenizer = AutoTokenizer.from_pretrained(work / "model")
    model = AutoModelForCausalLM.from_pretrained(work / "model", dtype=torch.float32, attn_implementation="sdpa")
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=settings["lora_r"], lora_alpha=settings["lora_alpha"], lora_dropout=0.0,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    window = TrainingWindowCallback(TrainerCallback)
    args = SFTConfig(
        output_dir=str(out_dir), num_train_epochs=1, per_device_train_batch_size=settings["batch_size"],
        learning_rate=settings["learning_rate"], weight_decay=0.0, lr_scheduler_type="linear", warmup_steps=0,
        max_grad_norm=1.0, logging_steps=1, save_strategy="no", eval_strategy="no", report_to="none",
        disable_tqdm=True, seed=settings["seed"], bf16=False, fp16=False, gradient_checkpointing=False,
        use_cpu=not torch.cuda.is_available(), padding_free=padding_free,
        # The ids are tokenized and truncated already; padding-free refuses a max_length without packing.
        max_length=None, dataset_kwargs={"skip_prepare_dataset": True}, remove_unused_columns=False,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=peft_config, callbacks=[window.callback])
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return {"seconds": window.seconds, "cpu_seconds": window.cpu_seconds, "steps": int(trainer.state.global_step),
            "tokens": int(settings["tokens"]), "losses": losses}


def run_arm(arm: str, mode: str, work: Path, out_dir: Path) -> dict[str, Any]:
    """Train one arm; its figures with the peak RSS and package versions."""
    from benchmarks.harness import package_versions
    from benchmarks.lm_setup import quiet_transformers

    quiet_transformers()
    settings = json.loads((work / "settings.json").read_text(encoding="utf-8"))
    lora = mode == "lora"
    if arm in TUNEDECK_PACKING:
        figures = run_tunedeck(work, settings, lora, TUNEDECK_PACKING[arm], out_dir)
    elif arm in TRL_ARMS:
        figures = run_trl(work, settings, lora, arm == "trl_padding_free", out_dir)
    else:
        raise SystemExit(f"unknown arm {arm!r}; expected one of {', '.join(ARMS)}")
    figures["peak_rss_mib"] = peak_rss_mib()
    figures["versions"] = package_versions(("torch", "transformers", "trl", "peft", "accelerate", "datasets"))
    return figures


def main(argv: list[str] | None = None) -> None:
    """Run the arm named on the command line and write its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", required=True, choices=ARMS)
    parser.add_argument("--mode", required=True, choices=("lora", "full"))
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--run-dir", type=Path, required=True, help="a fresh folder for the trainer's output")
    args = parser.parse_args(argv)
    figures = run_arm(args.arm, args.mode, args.work, args.run_dir)
    args.out.write_text(json.dumps(figures), encoding="utf-8")


if __name__ == "__main__":
    main()
