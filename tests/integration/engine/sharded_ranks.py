"""What each process of the sharded-checkpoint tests runs, and how they are started.

The processes are started by `torch.multiprocessing.spawn`, which imports this module in each
of them, so everything here is at module level. They meet through a FileStore in the test's
temporary folder (no port to race for), use gloo on the CPU, and shard a tiny Llama with FSDP2
(`fully_shard` on each decoder layer, then on the whole model), in fp32. Rank 0 writes what
the test compares: gathered tensors as safetensors, numbers as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

GLOBAL_BATCH = 8  # rows per step, split evenly over 4, 2 or 1 processes
SEQUENCE = 16
LEARNING_RATE = 1e-3
LORA_TARGETS = ["q_proj", "v_proj"]
# What every process needs, imported once by the fork server the processes are forked from.
PRELOAD = [
    "tests.integration.engine.sharded_ranks",
    "torch.distributed.checkpoint",
    "torch.distributed.fsdp",
    "transformers.models.llama.modeling_llama",
    "peft",
    "tunedeck.engine.distributed.sharded_checkpoint",
]


def batch(step: int) -> torch.Tensor:
    """The global batch of `step`: the same token rows whatever the number of processes."""
    # A fixed scramble of token ids 5..499 (past the special tokens), different for each step.
    positions = torch.arange(GLOBAL_BATCH * SEQUENCE)
    return ((positions * 131 + positions // 7 * 53 + step * 37) % 495 + 5).view(GLOBAL_BATCH, SEQUENCE)


def probe() -> torch.Tensor:
    """A fixed input whose logits compare a trained model with its exported weights."""
    return batch(99)[:2]


def new_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters (weight decay on, so that the step count matters too)."""
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LEARNING_RATE, weight_decay=0.01)


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int) -> float:
    """One optimizer step on this rank's rows of the global batch; returns the global mean loss."""
    import torch.distributed as dist

    world, rank = (dist.get_world_size(), dist.get_rank()) if dist.is_initialized() else (1, 0)
    rows = batch(step).chunk(world)[rank]
    model.train()
    loss = model(input_ids=rows, labels=rows).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    total = loss.detach().clone()
    if world > 1:
        # Every row has the same number of labels, so the mean of the ranks' means is the batch mean.
        dist.all_reduce(total)
    return float(total) / world


def full_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Whole (gathered) model and optimizer tensors, by name, and the optimizer's settings.

    With a process group only rank 0 gets them (the others get empty results).
    """
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=dist.is_initialized())
    model_state, optimizer_state = get_state_dict(model, optimizer, options=options)
    tensors = {f"model/{key}": value for key, value in model_state.items()}
    for fqn, values in optimizer_state.get("state", {}).items():
        for name, value in values.items():
            tensors[f"optimizer/{fqn}/{name}"] = torch.as_tensor(value)
    settings = [
        {key: value for key, value in group.items() if key != "params"} | {"params": sorted(group["params"])}
        for group in optimizer_state.get("param_groups", [])
    ]
    return {key: value.detach().clone().contiguous() for key, value in tensors.items()}, {"param_groups": settings}


def load_model(model_dir: str) -> torch.nn.Module:
    """The tiny causal model in fp32."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)


def shard(model: torch.nn.Module, layers: torch.nn.ModuleList) -> None:
    """FSDP2 as the engine applies it: each decoder layer is a unit, then the rest at the root."""
    from torch.distributed.fsdp import fully_shard

    for layer in layers:
        fully_shard(layer)
    fully_shard(model)


def write_results(out: Path, name: str, tensors: dict[str, torch.Tensor], numbers: dict[str, Any]) -> None:
    """Rank 0's results: `<name>.safetensors` and `<name>.json`."""
    from safetensors.torch import save_file

    save_file(tensors, str(out / f"{name}.safetensors"))
    (out / f"{name}.json").write_text(json.dumps(numbers), encoding="utf-8")


def logits_of(model: torch.nn.Module) -> torch.Tensor:
    """The model's logits on the probe (every rank must call it: FSDP gathers in the forward)."""
    model.eval()
    with torch.no_grad():
        return model(input_ids=probe()).logits.detach().clone()


def train_and_save(rank: int, world: int, out: str, model_dir: str) -> None:
    """4 processes: 2 steps, a sharded checkpoint, then a third step as the reference for resumes."""
    from tunedeck.engine.distributed.sharded_checkpoint import save_sharded

    out_dir = Path(out)
    model = load_model(model_dir)
    shard(model, model.model.layers)
    optimizer = new_optimizer(model)
    losses = [train_step(model, optimizer, step) for step in range(2)]
    save_sharded(out_dir / "sharded-4", model, optimizer, extra={"step": 2})
    saved, settings = full_state(model, optimizer)
    logits = logits_of(model)
    if rank == 0:
        write_results(out_dir, "saved", saved | {"logits": logits}, settings | {"losses": losses})
    loss = train_step(model, optimizer, 2)
    after, _ = full_state(model, optimizer)
    if rank == 0:
        write_results(out_dir, "continued", after, {"loss": loss})


def resume(rank: int, world: int, out: str, model_dir: str) -> None:
    """2 processes: load the 4-process checkpoint, save it again as 2 shards, take the third step; then a LoRA run."""
    from tunedeck.engine.distributed.sharded_checkpoint import load_sharded, save_sharded

    out_dir = Path(out)
    model = load_model(model_dir)
    shard(model, model.model.layers)
    optimizer = new_optimizer(model)
    info = load_sharded(out_dir / "sharded-4", model, optimizer)
    loaded, settings = full_state(model, optimizer)
    save_sharded(out_dir / "sharded-2", model, optimizer)
    loss = train_step(model, optimizer, 2)
    after, _ = full_state(model, optimizer)
    if rank == 0:
        numbers = settings | {"world_size": info.world_size, "extra": info.extra}
        write_results(out_dir, "loaded", loaded, numbers)
        write_results(out_dir, "resumed", after, {"loss": loss})
    train_lora(rank, out_dir, model_dir)


def train_lora(rank: int, out_dir: Path, model_dir: str) -> None:
    """A LoRA adapter trained one step under FSDP2 and saved sharded, with its logits and adapter config."""
    from peft import LoraConfig, get_peft_model

    from tunedeck.engine.distributed.sharded_checkpoint import save_sharded

    config = LoraConfig(r=4, lora_alpha=8, target_modules=LORA_TARGETS, lora_dropout=0.0)
    model = get_peft_model(load_model(model_dir), config)
    shard(model, model.base_model.model.model.layers)
    optimizer = new_optimizer(model)
    train_step(model, optimizer, 0)
    save_sharded(out_dir / "sharded-lora", model, optimizer)
    logits = logits_of(model)
    if rank == 0:
        # What export copies beside the weights: the adapter's own config.
        model.peft_config["default"].save_pretrained(str(out_dir / "lora-export"))
        write_results(out_dir, "lora", {"logits": logits}, {})


def _entry(rank: int, target: Callable[..., None], world: int, store_file: str, args: tuple[Any, ...]) -> None:
    import torch.distributed as dist

    # Two cores serve every process: more threads each would only fight over them.
    torch.set_num_threads(1)
    store = dist.FileStore(store_file, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timedelta(seconds=120))
    try:
        target(rank, world, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def spawn(target: Callable[..., None], world: int, store_file: Path, *args: Any) -> None:
    """Run `target(rank, world, *args)` in `world` processes sharing a gloo process group.

    The processes are forked from a fork server that imported torch and transformers once:
    started from scratch (`torch.multiprocessing.spawn`), each would spend seconds of the two
    cores importing them again. The fork server never ran torch code, so forking it is safe.
    """
    import multiprocessing

    import torch.multiprocessing as mp

    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    mp.start_processes(_entry, args=(target, world, str(store_file), args), nprocs=world, start_method="forkserver")
